// Placeholder until the store bindings land.
#include "bindings/bindings.h"

namespace dolsot::bindings {
void BindStores(pybind11::module_&) {}
}  // namespace dolsot::bindings
