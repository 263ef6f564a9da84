// After a restore: functions defined in cells must see the session's namespace again.
//
// runtime.py saves with dill in recurse mode, which stores a function with a private copy of the
// globals it uses, so a restored `def f(): return x` would keep reading the `x` of the snapshot and a
// `global total; total += n` would update the copy. This cell, run once after a restore, rebuilds
// such functions (top-level names, and the methods of classes defined in cells) around the live
// namespace. Functions whose globals already are the namespace (a payload saved without recurse mode)
// and functions of other modules are left alone. Identity across names is not kept by a per-name
// snapshot anyway (docs/persistence.md), so replacing the function objects loses nothing.
// Stdlib only; Python 3.9-3.13. Its own names are `_`-prefixed and deleted, and it ends in a
// statement, so it leaves no trace in the namespace and `_` is unchanged.
const RELINK_SOURCE = `
def _awrepl_relink(names):
    import types
    g = globals()
    main = g.get("__name__")

    def fresh(f):
        if f.__globals__ is g or f.__globals__.get("__name__") != main:
            return f
        nf = types.FunctionType(f.__code__, g, f.__name__, f.__defaults__, f.__closure__)
        nf.__kwdefaults__ = f.__kwdefaults__
        nf.__dict__.update(f.__dict__)
        nf.__qualname__ = f.__qualname__
        nf.__annotations__ = f.__annotations__
        nf.__doc__ = f.__doc__
        nf.__module__ = f.__module__
        return nf

    def member(a):
        if type(a) is types.FunctionType:
            return fresh(a)
        if isinstance(a, (staticmethod, classmethod)) and type(a.__func__) is types.FunctionType:
            b = fresh(a.__func__)
            return a if b is a.__func__ else type(a)(b)
        if type(a) is property:
            parts = [fresh(x) if type(x) is types.FunctionType else x for x in (a.fget, a.fset, a.fdel)]
            return a if parts == [a.fget, a.fset, a.fdel] else property(parts[0], parts[1], parts[2], a.__doc__)
        return a

    for name in names:
        v = g.get(name)
        if type(v) is types.FunctionType:
            g[name] = fresh(v)
        elif isinstance(v, type) and getattr(v, "__module__", None) == main:
            for k, a in list(vars(v).items()):
                b = member(a)
                if b is not a:
                    setattr(v, k, b)
`;

/** The cell that relinks the restored `names` (see above). */
export function relinkCell(names: readonly string[]): string {
  return `${RELINK_SOURCE}\ntry:\n    _awrepl_relink(${JSON.stringify(names)})\nfinally:\n    del _awrepl_relink\n`;
}
