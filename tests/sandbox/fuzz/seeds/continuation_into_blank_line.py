d.\

_cassi,_cassi,