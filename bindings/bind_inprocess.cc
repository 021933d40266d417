// Placeholder until this binding lands.
#include "bindings/bindings.h"

namespace dolsot::bindings {
void BindInProcess(pybind11::module_&) {}
}  // namespace dolsot::bindings
