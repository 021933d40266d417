match v:
    case {"k": cap, **rest} if cap: pass
    case Point(x=0) as p: pass
try:
    pass
except* E as e:
    del e
async def f():
    async with a as b:
        await g(lambda q=1: q)
type T[X] = list[X]
