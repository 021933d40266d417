import csv, io
from collections import namedtuple
P = namedtuple("P", "x y")
p = P(1, 2)._replace(x=3)
rows = list(csv.reader(io.StringIO("a,b\n1,2")))
pat = re.compile(r"\d+")
try:
    int("x")
except ValueError as err:
    if err.args and err.args[0] == "bad":
        print(err.args[0])
    kept = err.args[0]
ok = o.format == "png"
f = o.format
io.open("x")
m = io
class S(io.StringIO): pass
