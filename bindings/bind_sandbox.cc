// Placeholder until this binding lands.
#include "bindings/bindings.h"

namespace dolsot::bindings {
void BindSandbox(pybind11::module_&) {}
}  // namespace dolsot::bindings
