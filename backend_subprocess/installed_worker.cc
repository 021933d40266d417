// Compiled into each C++ host that links dolsot::dolsot_subprocess from an
// installed prefix (an INTERFACE source of the exported target), never into
// the library: tells DefaultWorkerCommand where that prefix's dolsot-worker
// is. DOLSOT_INSTALLED_WORKER comes from the exported target, as the prefix
// find_package found, so a prefix moved after `cmake --install` still works.
// Weak, so a host whose several targets each compile it links one copy.
#ifndef DOLSOT_INSTALLED_WORKER
#error "DOLSOT_INSTALLED_WORKER is set by dolsot's exported CMake targets"
#endif

extern "C" __attribute__((weak)) const char* dolsot_installed_worker() {
  return DOLSOT_INSTALLED_WORKER;
}
