class A:
    def __init__(self):
        self._n = 0
    def m(self):
        self._n += 1
        return self._n
class Node(A):
    @classmethod
    def make(cls):
        return cls()
a = Node.make()
print(a.m(), isinstance(a, A), A.__name__)
