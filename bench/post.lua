-- wrk script: POST distinct Trino-like events. Each template has one @RUNID@ placeholder,
-- replaced per request so that no two requests are equal (de-duplication must not flatter us).
local templates = {}
local counter = 0
local thread_tag = ""
local path = "/api/v1/lineage"

function init(args)
  local file = assert(io.open(args[1], "r"))
  for line in file:lines() do
    local at = line:find("@RUNID@", 1, true)
    table.insert(templates, { line:sub(1, at - 1), line:sub(at + 7) })
  end
  file:close()
  if args[2] then path = args[2] end
  thread_tag = string.format("%08x", math.random(0, 0x7fffffff)) .. tostring(os.time())
  wrk.headers["Content-Type"] = "application/json"
end

function request()
  counter = counter + 1
  local t = templates[(counter % #templates) + 1]
  return wrk.format("POST", path, nil, t[1] .. thread_tag .. "-" .. counter .. t[2])
end

function done(summary, latency, requests)
  io.write(string.format(
    'WRKJSON {"requests": %d, "duration_us": %d, "errors_status": %d, "errors_connect": %d, ' ..
    '"errors_timeout": %d, "p50_us": %d, "p90_us": %d, "p99_us": %d, "max_us": %d}\n',
    summary.requests, summary.duration, summary.errors.status, summary.errors.connect, summary.errors.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max))
end
