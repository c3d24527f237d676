-- wrk script of the crash storm (bench/wrk_storm.py runs it): the reports in the file named by
-- the first argument (one JSON body a line), each sent once in order. Once every one is on its
-- way the connections wait (delay) rather than send more, and once every one has been answered
-- the thread stops and says so. Arguments: bodies file, bearer token, and "one-shot" (a
-- "Connection: close" header: one connection per report, as crash kernels send) or
-- "keep-alive". Run it with one thread (-t1): each thread would send every body.
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

function delay()
  -- wrk keeps every connection busy: past the last body a connection would send a body again.
  if sent >= #bodies then
    return 3600 * 1000
  end
  return 0
end

function request()
  sent = sent + 1
  return wrk.format("POST", wrk.path, headers, bodies[sent])
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
  -- Every latency wrk recorded (microseconds, and how many times), so that the runs of a storm
  -- given in turns can be pooled into one distribution.
  local recorded = {}
  for i = 1, #latency do
    local value, count = latency(i)
    recorded[#recorded + 1] = string.format("[%d, %d]", value, count)
  end
  local errors = summary.errors
  io.write(string.format(
    '{"requests": %d, "duration_us": %d, "latency_us": [%s], '
      .. '"errors": {"connect": %d, "read": %d, "write": %d, "status": %d, "timeout": %d}}\n',
    summary.requests, summary.duration, table.concat(recorded, ", "),
    errors.connect, errors.read, errors.write, errors.status, errors.timeout
  ))
end
