import re
from re import match as m
p = r"(a+)+$"
ok = re.fullmatch(r"(\d{1,3}\.){3}\d{1,3}", s)
bad = re.compile(p), m("(x*)*y", s), re.split(r"(a++)+", s)
x = 7 ** 30000000
y = 2 ** 64 + (1 << 64) + n ** 2 + z ** 0.5
s = "-" * 80 + "a" * 10 ** 9
t = ([0] * 9000) * 9000
x **= 10 ** 7
import math
math.factorial(10 ** 7)
