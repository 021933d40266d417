// Placeholder until this binding lands.
#include "bindings/bindings.h"

namespace dolsot::bindings {
void BindRepl(pybind11::module_&) {}
}  // namespace dolsot::bindings
