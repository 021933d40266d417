// Live output (issue #40): the callbacks a host hands Run to see what a cell
// prints and shows while it runs, besides the Result at its end. Plain C++;
// core/live_output_stream.h delivers them on a thread of dolsot's.
#pragma once

#include <functional>
#include <string_view>

namespace dolsot {

// A chunk of the cell's stdout and stderr, in the order written (chunks may
// merge). UTF-8 as the cell wrote it; a Repl's session process runs the
// user's code, so treat the bytes as untrusted and decode with replacement.
using OutputCallback = std::function<void(std::string_view text)>;
// The PNG bytes of a figure the cell showed (plt.show()), in order with the
// text around it. Untrusted bytes, as above.
using ImageCallback = std::function<void(std::string_view png)>;

// RunOptions::live. Both empty: nothing is streamed (the default). The
// callbacks are called one at a time, never on the thread that called Run
// nor on the cell's own thread, never while dolsot holds a lock the caller
// could hold; every call is made before Run returns, none after. A callback
// should not throw (a C++ exception it throws is swallowed).
struct OutputCallbacks {
  OutputCallback on_output;
  ImageCallback on_image;

  bool empty() const { return !on_output && !on_image; }
};

}  // namespace dolsot
