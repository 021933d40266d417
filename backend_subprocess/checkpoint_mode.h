// CheckpointMode: when a Repl writes a session's namespace to the store,
// shared by the Repl's options and the worker's settings.
#pragma once

namespace dolsot {

// When a session's namespace is written to the store. Result::dropped lists
// the names a checkpoint could not serialize: exact in kSync; in kAsync as of
// the latest checkpoint that has landed. A session that is restored lists the
// names that did not come back in its first Result's dropped. Eviction (over
// max_live_sessions) checkpoints in every mode, kOff included; a session
// whose checkpoint the store fails to save stays live, over the limit.
enum class CheckpointMode {
  kSync,   // the Result returns once the checkpoint is durable (the CLI)
  kAsync,  // a forked copy writes it while the next cell runs (library default)
  kOff,    // never checkpoint after a cell
};

}  // namespace dolsot
