"""N requests one after another on one keep-alive connection (for
syscalls.sh): PORT PATH BODY_FILE MARKER N. Checks every answer (200, the
marker in the body) and prints the last body's size in bytes."""
import http.client
import sys

port, path, body_file, marker, n = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
body = open(body_file, "rb").read()
headers = {
    "content-type": "application/json",
    "authorization": "Bearer sk-bench-local",
    "x-api-key": "sk-bench-local",
    "x-goog-api-key": "sk-bench-local",
    "anthropic-version": "2023-06-01",
}
conn = http.client.HTTPConnection("127.0.0.1", int(port))
size = 0
for _ in range(n):
    conn.request("POST", path, body=body, headers=headers)
    r = conn.getresponse()
    data = r.read()
    if r.status != 200 or marker.encode() not in data:
        sys.exit(f"{path}: {r.status} {data[:300]!r}")
    size = len(data)
print(size)
