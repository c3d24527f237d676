-- wrk script of the crash storm (bench/wrk_storm.py runs it): the storm's reports, one JSON
-- body a line in the file named by the first argument, each sent once in order; once every
-- one has been answered the thread stops and says so (requests started before that are
-- resends of the first ones: replays, as a host resends). Arguments: bodies file, bearer token, and
-- "one-shot" (a "Connection: close" header: one connection per report, as crash kernels
-- send) or "keep-alive". Run it with one thread (-t1): each thread would send every body.
local bodies, headers = {}, {}
local sent, answered = 0, 0

function init(args)
  for line in io.lines(args[1]) do
    bodies[#bodies + 1] = line
  end
  headers["Authorization"] = "Bearer " .. args[2]
  headers["Content-Type"] = "application/json"
  if args[3] == "one-shot" then
    headers["Connection"] = "close"
  end
end

function request()
  sent = sent + 1
  return wrk.format("POST", wrk.path, headers, bodies[(sent - 1) % #bodies + 1])
end

function response(status, response_headers, body)
  answered = answered + 1
  if answered == #bodies then
    -- wrk runs for its whole -d otherwise: bench/wrk_storm.py ends it (SIGINT) on this line.
    io.write("storm answered\n")
    io.flush()
    wrk.thread:stop()
  end
end

function done(summary, latency, requests)
  local errors = summary.errors
  io.write(string.format(
    '{"requests": %d, "duration_us": %d, "p50_ms": %.1f, "p99_ms": %.1f, "max_ms": %.1f, '
      .. '"errors": {"connect": %d, "read": %d, "write": %d, "status": %d, "timeout": %d}}\n',
    summary.requests, summary.duration, latency:percentile(50) / 1000, latency:percentile(99) / 1000,
    latency.max / 1000, errors.connect, errors.read, errors.write, errors.status, errors.timeout
  ))
end
