# Fills an aggregator store (its schema made by a real `serve`) with orders: 200 flights x 180 seats x 5 orders,
# 3 lines each, as MessagePack records the store decodes. Used by run.sh.
import msgpack, sqlite3, struct, sys, uuid, random
path = sys.argv[1]
rnd = random.Random(7)
db = sqlite3.connect(path)
items = [("Peanuts", 200), ("Chips", 300), ("Popcorn", 400), ("Sparkling water, 330 ml", 250)]
seats = [f"{r}{l}" for r in range(1, 31) for l in "ABCDEF"]
rows = []
for f in range(200):
    flight = f"ZA{100+f}/2026-11-21"
    for seat in seats:
        for k in range(5):
            oid = uuid.UUID(int=rnd.getrandbits(128), version=4)
            lines = [{"item": {"name": n, "unitPrice": p}, "count": rnd.randint(1, 3)} for (n, p) in rnd.sample(items, 3)]
            ts = msgpack.Timestamp(1795200000 + rnd.randint(0, 86400))
            rec = {"type": "order", "id": str(oid).upper(), "revision": 1, "flight": flight, "seat": seat,
                   "lineItems": lines, "currency": "USD", "createdAt": ts, "device": "cart-%d" % (f % 10)}
            rows.append((oid.bytes, 1, flight, seat, rec["device"], msgpack.packb(rec)))
db.executemany("INSERT INTO orders (id, revision, flight, seat, device, record) VALUES (?,?,?,?,?,?)", rows)
db.commit()
print(len(rows), "orders")
