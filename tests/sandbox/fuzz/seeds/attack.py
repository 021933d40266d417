import os
().__class__.__base__.__subclasses__()
ｅｖａｌ("1")
g.gi_frame.f_back
"{0.\x5f_class__}".format(x)
print = 1
tb.x = 2
# cimport os
