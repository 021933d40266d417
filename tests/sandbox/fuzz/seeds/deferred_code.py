def g():
    try:
        yield 1
    finally:
        print("x")


def h():
    with cm() as f:
        yield f


async def c():
    await x
    async with lock:
        pass
    async for i in y:
        print(i)
