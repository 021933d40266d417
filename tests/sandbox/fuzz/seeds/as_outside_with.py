mq in getatt as se\
. tbtimq in set
