d.

_cdetai,_casssi,