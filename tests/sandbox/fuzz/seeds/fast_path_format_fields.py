x = f'{a!r:>{w}} {b["k"]} {{eval}} {d=}'
r = math.pi * 2; tb.log(r)
