// SharePagesAhead: what the worker does, once idle, before it forks the
// sessions it keeps ahead, so that they share more of its pages (issue #39,
// memory per session).
//
// A session process is a fork of the worker: every page it writes becomes
// its own (and, with rollback on, its snapshot's). Two things wrote whole
// megabytes per session that the worker could write once for all:
//   - dill, which a session's checkpoints need as soon as it holds a
//     function or class of its own (PreloadSerializers imported it in every
//     such runner, ~6.5 MB of private pages each): imported here instead,
//     so every later session shares it;
//   - the cyclic GC, whose full collections write the header of every
//     tracked object, the worker's included: gc.freeze() here moves what
//     exists into the permanent generation, which no collection walks, so
//     a collection in a session writes only that session's own objects.
// Neither changes what a cell can do: `import dill` finds the module loaded,
// as it already did in any session that defined a function, and frozen
// objects are the worker's, never garbage a session made (gc.unfreeze()
// in a cell works as anywhere).
#pragma once

namespace dolsot {

// Needs the GIL; call once, in the worker, before a fork it wants shared.
// A failure (dill missing, say) is cleared: sessions then import it
// themselves, as before.
void SharePagesAhead();

// The lighter first step, for a worker that is seldom idle long enough for
// the one above (an agent loop opening a session every few tens of ms):
// the modules nearly every session imports on its first use of the host
// (pickle: a variable, a tool call, a checkpoint) or its first error
// (traceback, and through it linecache and tokenize; one traceback is
// formatted, so what that imports and specializes on first use is the
// worker's), ~10 ms each time a session did it itself (and its private
// pages), then gc.freeze().
void PreloadCommonModules();

}  // namespace dolsot
