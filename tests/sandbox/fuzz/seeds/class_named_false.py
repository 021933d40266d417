import json
imer, defaultdict
from dataclasses import dataclass, field


eld


@d
class False:
    id: int
    cust@d
class False:
   str
    items: feu
 