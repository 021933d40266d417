// What a checkpoint asks of a session's names and values before it encodes
// them (checkpoint.h, unsaveable_names.h). Needs the GIL.
#pragma once

#include <Python.h>

#include <optional>
#include <string_view>

namespace dolsot {
namespace checkpoint_values {

// A name's UTF-8, valid while `text` lives; nullopt (no error set) for a
// non-str or a str with a lone surrogate (no name a checkpoint can hold).
std::optional<std::string_view> Utf8(PyObject* text);

// `__x__`: a name a checkpoint leaves out.
bool IsDunder(std::string_view name);

// A class or function defined by cell code: pickle would only store a
// reference to itself in __main__, so it must go by value.
bool IsMainDefinition(PyObject* value);

// True when the pending exception is pickle's "cannot pickle 'X' object"
// TypeError: an object with no state to save (lock, socket, generator, file).
// dill cannot usefully save these either, so they are dropped without it.
// A pending TypeError is cleared; any other exception is left pending.
bool PendingIsCannotPickle();

}  // namespace checkpoint_values
}  // namespace dolsot
