-- wrk script for benches/load/run.sh: POSTs one fixed body with fixed headers
-- and writes the summary as shell `KEY=value` lines.
--   WRK_BODY_FILE  the request body
--   WRK_HEADERS    headers, "name: value" separated by '|'
--   WRK_OUT        where done() writes its results
--   WRK_MARKER     optional: count 2xx answers whose body lacks this text (UNMARKED)
local f = assert(io.open(os.getenv("WRK_BODY_FILE"), "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/json"
for h in string.gmatch(os.getenv("WRK_HEADERS") or "", "[^|]+") do
  local k, v = h:match("^%s*([^:]+):%s*(.-)%s*$")
  if k then wrk.headers[k] = v end
end

-- Each thread has its own Lua state: its count is read back in done().
local marker = os.getenv("WRK_MARKER")
if marker and marker ~= "" then
  local threads = {}
  function setup(thread) table.insert(threads, thread) end
  unmarked = 0
  function response(status, headers, body)
    -- non-2xx answers are wrk's own status errors
    if status < 300 and (not body or not string.find(body, marker, 1, true)) then
      unmarked = unmarked + 1
    end
  end
  function unmarked_total()
    local n = 0
    for _, t in ipairs(threads) do n = n + (t:get("unmarked") or 0) end
    return n
  end
end

function done(summary, latency, requests)
  local out = assert(io.open(os.getenv("WRK_OUT"), "w"))
  if unmarked_total then out:write(string.format("UNMARKED=%d\n", unmarked_total())) end
  local e = summary.errors
  out:write(string.format("REQUESTS=%d\n", summary.requests))
  out:write(string.format("DURATION_US=%d\n", summary.duration))
  out:write(string.format("BYTES=%d\n", summary.bytes))
  out:write(string.format("ERR_CONNECT=%d\nERR_READ=%d\nERR_WRITE=%d\nERR_STATUS=%d\nERR_TIMEOUT=%d\n",
    e.connect, e.read, e.write, e.status, e.timeout))
  out:write(string.format("P50_US=%d\nP90_US=%d\nP99_US=%d\nMAX_US=%d\nMEAN_US=%.0f\n",
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max, latency.mean))
  out:close()
end
