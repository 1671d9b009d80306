"""Memory per open stream: started by stream_memory.sh, not on its own.

usage: stream_memory.py N SB_PORT METRICS_PORT UPSTREAM_PORT SB_PID

Serves a trickling OpenAI upstream on UPSTREAM_PORT (one chunk every 100 ms,
for a minute), opens N streams through the gateway on SB_PORT, waits until
each has its first frame, and prints the gateway's RSS growth per open
stream; on an alloc-count build also its live heap per stream, by
allocation size (from the metrics endpoint on METRICS_PORT).
"""
import asyncio, sys, time, re
N, SB, MET, UP, PID = map(int, sys.argv[1:6])
FRAME = b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"tok "},"finish_reason":null}]}\n\n'
async def upstream(reader, writer):
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            m = re.search(rb"content-length: *(\d+)", head, re.I)
            if m: await reader.readexactly(int(m.group(1)))
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
            for i in range(600):
                writer.write(b"%x\r\n%s\r\n" % (len(FRAME), FRAME)); await writer.drain()
                await asyncio.sleep(0.1)
            writer.write(b"0\r\n\r\n"); await writer.drain()
    except Exception:
        pass
def rss():
    for l in open(f"/proc/{PID}/status"):
        if l.startswith("VmRSS"): return int(l.split()[1])
def classes():
    import urllib.request
    try:
        t = urllib.request.urlopen(f"http://127.0.0.1:{MET}/metrics").read().decode()
        return {int(k): int(v) for k, v in re.findall(r'^switchboard_heap_live_bytes_by_size\{le="(\d+)"\} (-?\d+)', t, re.M)}
    except Exception: return {}
def heap():
    import urllib.request
    try:
        t = urllib.request.urlopen(f"http://127.0.0.1:{MET}/metrics").read().decode()
        m = re.search(r"^switchboard_heap_live_bytes (\d+)", t, re.M)
        return int(m.group(1)) if m else None
    except Exception: return None
BODY = b'{"model":"trickle/gpt-trickle","stream":true,"messages":[{"role":"user","content":"hi"}]}'
got = 0
async def client():
    global got
    r, w = await asyncio.open_connection("127.0.0.1", SB)
    w.write(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer sk-bench-local\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(BODY), BODY))
    await w.drain()
    first = True
    while True:
        d = await r.read(65536)
        if not d: break
        if first and b"data:" in d: got += 1; first = False
async def main():
    asyncio.get_running_loop().set_exception_handler(lambda loop, ctx: None)
    srv = await asyncio.start_server(upstream, "127.0.0.1", UP, backlog=4096)
    await asyncio.sleep(0.5)
    r0, h0, c0 = rss(), heap(), classes()
    tasks = []
    for i in range(N):
        tasks.append(asyncio.create_task(client()))
        if i % 200 == 199: await asyncio.sleep(0.05)
    for _ in range(200):
        await asyncio.sleep(0.1)
        if got >= N: break
    await asyncio.sleep(3)
    r1, h1, c1 = rss(), heap(), classes()
    print(f"open streams {got}/{N}: RSS {r0/1024:.1f} -> {r1/1024:.1f} MB, {(r1-r0)/max(got,1):.1f} kB per stream", end="")
    if h0 is not None and h1 is not None: print(f"; heap {h0/1e6:.1f} -> {h1/1e6:.1f} MB, {(h1-h0)/max(got,1)/1024:.1f} KiB per stream")
    else: print()
    for k in sorted(c1):
        d = (c1[k] - c0.get(k, 0)) / max(got, 1)
        if abs(d) > 100: print(f"   size <= {k}: {d/1024:.1f} KiB per stream")
    for t in tasks: t.cancel()
asyncio.run(main())
