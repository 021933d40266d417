// The Python threads of a session process other than the calling one: what
// a killed cell's Result names as lost, and whether a proven cell runs alone.
#pragma once

#include <string>
#include <vector>

namespace dolsot {

// The names of the Python threads other than this one that are alive now
// (at most 16): a rollback cannot bring them back, and the Result of a
// killed cell says which were lost. A thread threading does not list (one
// started with _thread.start_new_thread, a C thread that holds a thread
// state) is named by how it was started. Needs the GIL.
std::vector<std::string> LiveThreadNames();

// Whether a thread other than this one has a Python thread state in this
// interpreter: a thread that could run Python code while a proven cell
// runs. Stricter than LiveThreadNames (which sees threading's threads
// only: not one started with _thread.start_new_thread, nor a C thread
// that holds a thread state), and reads no module, dict or attribute: a
// walk of a list of pointers (the str, dict and attribute lookups of
// LiveThreadNames cost ~10 µs of a paced cell's path with the caches
// cold). Needs the GIL, which every change to the list but a foreign
// thread's first PyGILState_Ensure (a push at the head) holds.
bool OtherPythonThreads();

}  // namespace dolsot
