// The class-store guard: while a gated cell runs on a thread
// (embedded/gated_cell.h), or a gated session's code runs later
// (embedded/gated_code.h), a store or delete of an attribute on a class the
// session did not define fails with an AttributeError carrying the
// `module-assignment` finding (`json.JSONDecoder.decode = f`,
// `random.Random.choice = f`, `del uuid.UUID.hex`, whatever name the class is
// reached by). The session's own classes are those whose own `__module__` is
// the very str object its builtins hold as `__name__` (every class statement
// of its cells: ABCMeta's, Enum's, `__init_subclass__` and `__set_name__`
// stores into the newborn class included), and the classes `type.__new__`
// made for its gated cells: called from the cell's own code or from
// collections.namedtuple (namedtuple, typing.NamedTuple).
//
// How: CPython raises no audit event for a plain class attribute store
// (`object.__setattr__` fires only for `__class__`, `__name__`, `__module__`,
// `__doc__`, `__bases__`, `__qualname__`; checked on 3.10-3.13), so the guard
// wraps `type`'s own slots: `type.tp_setattro` (and the `type.__setattr__` /
// `type.__delattr__` descriptors and every metaclass that copied the slot,
// so `super().__setattr__` in EnumType reaches it too) and `type.tp_new`
// (to know the classes a gated cell makes). A store on any thread not running
// a gated cell pays one thread_local read and two dict lookups. Installed
// on the first gated session (InstallClassStoreGuard) and never removed; an
// ungated process never installs it.
//
// Everything here needs the GIL.
#pragma once

#include "core/status.h"

namespace dolsot {

// Installs the guard in this interpreter (the slots once per process, the
// descriptors and existing metaclasses once per interpreter). Idempotent.
Status InstallClassStoreGuard();

}  // namespace dolsot
