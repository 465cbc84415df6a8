import sys,collections,statistics
d=collections.defaultdict(list)
for l in open(sys.argv[1]):
  v,rest=l.split(':',1)
  for f in rest.split():
    sz,bw=f.split(':'); o,i=bw.split('/'); d[(sz,'oop',v)].append(float(o)); d[(sz,'ip',v)].append(float(i))
for k in sorted(d): print(k, 'median %.2f  min-max %.2f-%.2f'%(statistics.median(d[k]),min(d[k]),max(d[k])))
