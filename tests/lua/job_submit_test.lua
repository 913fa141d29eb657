-- Unit tests of conf-examples/job_submit.lua under a plain Lua (5.1, the
-- oldest Slurm links, and 5.3): its decisions for each kind of job and
-- partition, and its reading of imex.toml, with a `slurm` table standing in
-- for the one slurmctld provides (tests/e2e/shared-nodes.sh runs it in
-- slurmctld). Run from the repository root:
--   lua5.1 tests/lua/job_submit_test.lua
--   lua5.3 tests/lua/job_submit_test.lua --bench 1000  (ms per settings())
--   lua5.3 tests/lua/job_submit_test.lua --dump DIR    (the texts below, with
--     what TOML reads in each, to check against the toml crate)
-- A file is read in a child interpreter under `timeout`, so a reader that
-- waits on a FIFO fails its check instead of hanging the test.

local user_msgs = {}
slurm = {
  SUCCESS = 0, ERROR = -1, NO_VAL16 = 65534,
  log_user = function(fmt, ...) table.insert(user_msgs, string.format(fmt, ...)) end,
  log_debug = function() end,
}
dofile("conf-examples/job_submit.lua")
assert(type(slurm_job_submit) == "function" and type(slurm_job_modify) == "function")

-- The block is local to the script; reach it through the functions' upvalues.
local imex
for i = 1, 20 do
  local name, value = debug.getupvalue(slurm_job_submit, i)
  if name == "slurm_imex" then imex = value end
end
assert(imex, "slurm_imex is an upvalue of slurm_job_submit")

-- Texts the reader reads, each exactly as TOML does:
-- { text, domain, shared_nodes, what }.
local READ = {
  { '[imex]\ndomain = "rack"\nshared_nodes = "refuse"\n', "rack", "refuse", "both keys" },
  { '[imex]\ndomain = "job"\nshared_nodes = "refuse"\n', "job", "refuse", "job and refuse" },
  { '[imex] # the IMEX section\ndomain = "rack" # rack-wide\n', "rack", "exclusive", "comments after a header and a value" },
  { "[imex]\n  domain='rack'\n", "rack", "exclusive", "a literal string, indented" },
  { '[ imex ]\t# c\n\tdomain\t=\t"rack"#c\nshared_nodes="refuse"\n', "rack", "refuse", "blanks and tabs, no blanks" },
  { '[imex]\r\ndomain = "rack"\r\nshared_nodes = "refuse"\r\n', "rack", "refuse", "CRLF line ends" },
  { '\239\187\191[imex]\ndomain = "rack"\n', "rack", "exclusive", "a UTF-8 BOM" },
  { '# caf\195\169 \226\128\148 \240\159\154\128 \239\187\191\n[imex]\ndomain = "rack" # \226\156\147\n', "rack", "exclusive", "UTF-8 in comments" },
  { '[imex]\ndomain = "rack"', "rack", "exclusive", "no newline at the end" },
  { '[imex.daemon]\nunit = "x"\n[imex]\ndomain = "rack"\n', "rack", "exclusive", "[imex] after its sub-table" },
  { '[imex]\ndomain = "rack"\n[imex.daemon]\nunit = "domain = \\"job\\""\n[ imex . watch ]\nenabled = true\n', "rack", "exclusive", "sub-tables after [imex]" },
  { '[imex.daemon]\nunit = "a\\"b [imex] \\\\"\nbinary = \'[imex] "\'\n[imex]\ndomain = "rack"\n', "rack", "exclusive", "escaped quotes and brackets in strings" },
  { '[slurm]\nscontrol = "x # [imex]"\n[imex]\ndomain = "rack"\n', "rack", "exclusive", "a comment sign and a header in a string" },
  { '[imex.daemon]\nunit = \'"""\'\nctl = "\'\'\'"\nbinary = "\\"\\"\\""\n[imex]\ndomain = "rack"\n', "rack", "exclusive", "three quotes inside one-line strings" },
  { '[imex]\nchannel_count = 2_048\nhide_channels_from_other_jobs = false\nport_base = +33792\ndomain = "rack"\n', "rack", "exclusive", "numbers and booleans" },
  { '[imex.daemon]\ndomain = "rack"\n[imex]\n', "job", "exclusive", "a key of another table is not [imex]'s" },
  { '[slurm]\ndomain = "rack"\n', "job", "exclusive", "a key of [slurm]" },
  { 'domain = "rack"\n[imex]\n', "job", "exclusive", "a key at top level" },
  { "", "job", "exclusive", "an empty file" },
  { "# a comment\n\n  \t\n", "job", "exclusive", "comments and blank lines only" },
  { '[imex]\ndomain = "rack"\n[a.b.c.d]\n', "rack", "exclusive", "a header of four names" },
}
for _, case in ipairs(READ) do case.toml = case[2] end

-- Texts it gives up on, keeping the strict defaults (job, exclusive):
-- { text, what, toml = what TOML reads for [imex] domain: "job" (or none),
-- "rack", "other" (a value the programs refuse), "error" (not TOML) }.
-- Where TOML reads job, a line reader reads rack.
local GIVE_UP = {
  -- Multi-line strings: no line inside one is a header or a key.
  { '[imex]\ndomain = "job"\n[imex.daemon]\nunit = """\n[imex]\ndomain = "rack"\n"""\n', "a multi-line basic string holding [imex] and domain", toml = "job" },
  { "[imex]\ndomain = \"job\"\n[imex.daemon]\nunit = '''\n[imex]\ndomain = \"rack\"\n'''\n", "a multi-line literal string holding them", toml = "job" },
  { '[imex]\ndomain = "job"\n[imex.daemon]\nunit = """\n\\"""\n[imex]\ndomain = "rack"\n"""\n', "an escaped \\\"\"\" inside a multi-line basic string", toml = "job" },
  { "[imex]\ndomain = \"job\"\n[imex.daemon]\nunit = '''\n' \"\"\" ''\n[imex]\ndomain = \"rack\"\n'''\n", "quotes inside a multi-line literal string", toml = "job" },
  { '[imex]\ndomain = "job"\n[imex.daemon]\nunit = """a"""\nctl = """\n[imex]\ndomain = "rack"\n"""\n', "one opened and closed on a line, then one spanning lines", toml = "job" },
  { '[imex]\ndomain = "rack"\n[imex.daemon]\nunit = """x"""\n', "a multi-line string on one line (valid: given up all the same)", toml = "rack" },
  { "[imex]\ndomain = '''rack'''\n", "domain as a multi-line literal string", toml = "rack" },
  -- Arrays and inline tables, one line or several (TOML 1.1).
  { '[imex]\ndaemon = {\n  domain = "rack"\n}\n', "an inline table spanning lines", toml = "job" },
  { '[imex]\ndomain = "rack"\ndaemon = { unit = "x" }\n', "an inline table on one line", toml = "rack" },
  { '[slurm]\nx = [\n  "]",\n]\n[imex]\ndomain = "rack"\n', "an array spanning lines", toml = "rack" },
  { 'imex = { domain = "rack" }\n', "[imex] as an inline table", toml = "rack" },
  { '[imex]\ndomain = ["rack"]\n', "domain as an array", toml = "other" },
  -- Dotted and quoted keys.
  { 'imex.domain = "rack"\n', "a dotted key at top level", toml = "rack" },
  { '[imex]\ndomain = "rack"\ndaemon.unit = "x"\n', "a dotted key in [imex]", toml = "rack" },
  { '[imex]\ndomain = "job"\n"domain" = "rack"\n', "a quoted key repeating domain", toml = "error" },
  { "[imex]\ndomain = \"rack\"\n'shared_nodes' = \"refuse\"\n", "a quoted key", toml = "rack" },
  -- Keys and tables defined twice: TOML refuses the file.
  { '[imex]\ndomain = "job"\ndomain = "rack"\n', "domain twice", toml = "error" },
  { '[imex]\ndomain = "rack"\nshared_nodes = "refuse"\nshared_nodes = "refuse"\n', "shared_nodes twice, the same value", toml = "error" },
  { '[imex]\ndomain = "job"\n[slurm]\n[imex]\ndomain = "rack"\n', "[imex] twice", toml = "error" },
  { '[imex]\ndomain = "rack"\n[imex.daemon]\nunit = "x"\n[imex.daemon]\n', "a sub-table twice", toml = "error" },
  { '[imex]\ndomain = "rack"\ndaemon = 1\n[imex.daemon]\n', "a key, then a table of its name", toml = "error" },
  { '[imex.daemon]\n[imex]\ndomain = "rack"\ndaemon = 1\n', "a table, then a key of its name", toml = "error" },
  { 'imex = 1\n[imex]\ndomain = "rack"\n', "imex a key, then a table", toml = "error" },
  -- Headers a line reader would misplace.
  { '[imex]\ndomain = "job"\n[[imex.x]]\ndomain = "rack"\n', "an array of tables", toml = "job" },
  { '[[imex]]\ndomain = "rack"\n', "[[imex]]", toml = "other" },
  { '[imex]\n["imex.daemon"]\ndomain = "rack"\n', "a quoted header holding a dot", toml = "job" },
  { '["imex"]\ndomain = "rack"\n', "a quoted [imex]", toml = "rack" },
  { '[imex] x\ndomain = "rack"\n', "a header and more", toml = "error" },
  { '[imex]]\ndomain = "rack"\n', "a header and a bracket", toml = "error" },
  { '[imex.]\ndomain = "rack"\n', "a header with an empty name", toml = "error" },
  { '[]\n[imex]\ndomain = "rack"\n', "an empty header", toml = "error" },
  { '[imex]\ndomain = "rack"\n[a.b.c.d.e]\n', "a header of five names", toml = "rack" },
  -- Bytes TOML refuses.
  { '[imex]\ndomain = "rack"\n# caf\233\n', "a byte that is not UTF-8 (Latin-1)", toml = "error" },
  { '[imex]\ndomain = "rack"\n# \192\175\n', "an overlong UTF-8 sequence", toml = "error" },
  { '[imex]\ndomain = "rack"\n# \237\160\128\n', "a UTF-16 surrogate", toml = "error" },
  { '[imex]\ndomain = "rack"\n# \226\128\n', "a cut UTF-8 sequence", toml = "error" },
  { '[imex]\ndomain = "rack"\n# \27[2J\n', "an ESC", toml = "error" },
  { '[imex]\ndomain = "rack"\n\0\n', "a NUL", toml = "error" },
  { '[imex]\ndomain = "rack"\r# c\n', "a CR alone", toml = "error" },
  { "\0\255[imex\n= = =\n", "garbage", toml = "error" },
  -- Values: only job or rack, exclusive or refuse, written plainly.
  { '[imex]\ndomain = "r\\u0061ck"\n', "an escape in domain", toml = "rack" },
  { '[imex]\ndomain = "rack"\nshared_nodes = "everything"\n', "a bad shared_nodes: domain is not read either", toml = "rack" },
  { '[imex]\ndomain = "everything"\nshared_nodes = 3\n', "bad values", toml = "other" },
  { '[imex]\ndomain = "Rack"\n', "Rack", toml = "other" },
  { '[imex]\ndomain = 1\n', "a number", toml = "other" },
  { '[imex]\ndomain = rack\n', "a bare word", toml = "error" },
  { '[imex]\ndomain =\n', "no value", toml = "error" },
  { '[imex]\ndomain = "rack" "job"\n', "two values", toml = "error" },
  { '[imex]\ndomain = "rack" x\n', "a value and more", toml = "error" },
  { '[imex]\ndomain = "rack\n', "an unclosed string", toml = "error" },
  { "[imex]\ndomain = 'rack\n", "an unclosed literal string", toml = "error" },
  { '[imex.daemon]\nunit = "abc\n[imex]\ndomain = "rack"\n', "an unclosed string before [imex]", toml = "error" },
  { '[imex.daemon]\nunit = "a\\qb"\n[imex]\ndomain = "rack"\n', "a bad escape in another string", toml = "error" },
  { '[imex]\ndomain = "rack"\nx = foo\n', "a bare word in another key", toml = "error" },
  { '[imex]\ndomain = "rack"\nx = 1979-05-27 07:32:00\n', "a date and time with a blank", toml = "rack" },
}

-- Child modes: settings() of $SLURM_IMEX_CONFIG (the script's own lookup)
-- N times, a "domain shared_nodes" line each; a timing; the texts above.
if arg[1] == "--read" then
  for _ = 1, tonumber(arg[2]) or 1 do
    local got = imex.settings()
    print(got.domain .. " " .. got.shared_nodes)
  end
  os.exit(0)
end
if arg[1] == "--bench" then
  local n = tonumber(arg[2]) or 1000
  imex.config_path = function() return "conf-examples/imex.toml" end
  local clock = function() return tonumber(io.popen("date +%s%N"):read("*l")) end
  local start = clock()
  for _ = 1, n do imex.settings() end
  print(string.format("%d calls of settings() on conf-examples/imex.toml: %.2f ms per call (%s)",
    n, (clock() - start) / 1e6 / n, _VERSION))
  os.exit(0)
end
if arg[1] == "--dump" then
  local list = assert(io.open(arg[2] .. "/expected", "w"))
  for kind, cases in pairs({ read = READ, give_up = GIVE_UP }) do
    for i, case in ipairs(cases) do
      local name = string.format("%s-%02d.toml", kind, i)
      local f = assert(io.open(arg[2] .. "/" .. name, "wb"))
      f:write(case[1])
      f:close()
      list:write(name, "\t", case.toml, "\t", case[#case == 4 and 4 or 2], "\n")
    end
  end
  list:close()
  os.exit(0)
end

local config_dir = os.tmpname()
os.remove(config_dir)
os.execute("mkdir -p " .. config_dir)
local function write_config(text, name)
  local f = assert(io.open(config_dir .. "/" .. (name or "imex.toml"), "wb"))
  f:write(text)
  f:close()
end
-- The script finds imex.toml through $SLURM_IMEX_CONFIG when slurmctld has
-- it; plain Lua cannot set the environment, so point config_path there.
imex.config_path = function() return config_dir .. "/imex.toml" end

local failures, count = 0, 0
local function check(ok, what)
  count = count + 1
  if not ok then failures = failures + 1; print("FAIL: " .. what) end
end

-- imex.toml's text as the script reads it.
local s, why
for _, case in ipairs(READ) do
  s, why = imex.settings_of(case[1])
  check(s.domain == case[2] and s.shared_nodes == case[3] and why == nil,
    "read: " .. case[4] .. ": " .. s.domain .. " " .. s.shared_nodes .. " " .. tostring(why))
end
for _, case in ipairs(GIVE_UP) do
  s, why = imex.settings_of(case[1])
  check(s.domain == "job" and s.shared_nodes == "exclusive" and why ~= nil,
    "gives up: " .. case[2] .. ": " .. s.domain .. " " .. s.shared_nodes)
end

-- The shipped imex.toml as the programs read it (the defaults), and with its
-- two keys changed, its line ends, a BOM; then what makes it given up.
local shipped = assert(io.open("conf-examples/imex.toml")):read("*a")
local function shipped_with(domain, shared_nodes)
  local text = shipped:gsub('\ndomain = "job"\n', '\ndomain = "' .. domain .. '"\n')
  return (text:gsub('\nshared_nodes = "exclusive"\n', '\nshared_nodes = "' .. shared_nodes .. '"\n'))
end
local rack = shipped_with("rack", "refuse")
check(rack ~= shipped and select(2, rack:gsub('\ndomain = "rack"\n', "")) == 1, "the shipped imex.toml has one domain line")
for _, case in ipairs({
  { shipped, "job", "exclusive", "as shipped" },
  { rack, "rack", "refuse", "rack and refuse" },
  { (rack:gsub("\n", "\r\n")), "rack", "refuse", "rack and refuse, CRLF" },
  { "\239\187\191" .. rack, "rack", "refuse", "rack and refuse, a BOM" },
  { shipped_with("job", "refuse"), "job", "refuse", "job and refuse" },
}) do
  s, why = imex.settings_of(case[1])
  check(s.domain == case[2] and s.shared_nodes == case[3] and why == nil, "the shipped imex.toml, " .. case[4] .. ": " .. tostring(why))
end
for _, case in ipairs({
  { rack .. '\n[imex.x]\ny = """\n"""\n', "and a multi-line string" },
  { rack:gsub('\n%[imex%.daemon%]\n', '\n[imex.daemon]\nunit = """\n[imex]\ndomain = "job"\n"""\n'), "a multi-line string in [imex.daemon]" },
  { rack:gsub('\ndomain = "rack"\n', '\ndomain = "rack"\ndomain = "rack"\n'), "domain twice" },
  { rack .. "\n[imex]\n", "[imex] twice" },
  { rack:gsub('\n%[slurm%]\n', '\n[imex.daemon]\n[slurm]\n'), "[imex.daemon] twice" },
  { rack:gsub('\nspan = "split"\n', '\nspan = "split"\ndaemon.unit = "x"\n'), "a dotted key" },
  { rack:gsub("\n# ", "\n# \255", 1), "a byte that is not UTF-8" },
  { rack:gsub('\ndomain = "rack"\n', '\ndomain = "rack" # \0\n'), "a NUL" },
}) do
  s, why = imex.settings_of(case[1])
  check(s.domain == "job" and s.shared_nodes == "exclusive" and why ~= nil, "the shipped imex.toml, rack and refuse, gives up: " .. case[2])
end

-- Size and long lines: the cap holds, and reading stays linear.
local function padded(text, size) -- text, then comment lines to `size` bytes
  local line = "#" .. ("x"):rep(98) .. "\n"
  text = text .. line:rep(math.floor((size - #text) / #line))
  local left = size - #text
  if left == 0 then return text end
  return text .. ("#" .. ("x"):rep(left)):sub(1, left - 1) .. "\n"
end
local cap = 1048576
local timed = os.clock()
local exact = padded('[imex]\ndomain = "rack"\n', cap)
check(#exact == cap, "a text of the cap exactly: " .. #exact)
s, why = imex.settings_of(exact)
check(s.domain == "rack" and why == nil, "a text of the cap (1 MiB): read")
s, why = imex.settings_of(exact .. "\n")
check(s.domain == "job" and why ~= nil, "a text over the cap: given up")
s, why = imex.settings_of('[imex]\ndomain = "rack"\n#' .. ("x"):rep(cap - 100) .. "\n")
check(s.domain == "rack" and why == nil, "a comment line of 1 MiB")
s, why = imex.settings_of('[imex]\ndomain = "rack"\n' .. (" "):rep(cap - 100) .. "x\n")
check(s.domain == "job" and why ~= nil, "1 MiB of blanks, then a stray letter")
s, why = imex.settings_of('[imex]\ndomain = "rack"\nx = "' .. ('\\"'):rep(400000) .. '"\n')
check(s.domain == "rack" and why == nil, "a string of 400000 escaped quotes")
s, why = imex.settings_of('[imex]\ndomain = "rack"\n[a.b.c.d]\n[' .. ("a."):rep(300000) .. "a]\n")
check(s.domain == "job" and why ~= nil, "a header of 300001 names (four are read)")
local many = { "[imex]", 'domain = "rack"' }
for i = 1, 60000 do many[#many + 1] = "k" .. i .. " = 1" end
s, why = imex.settings_of(table.concat(many, "\n"))
check(s.domain == "rack" and why == nil, "60000 keys")
timed = os.clock() - timed
check(timed < 10, string.format("the long texts took %.1f s of CPU", timed))

local parts = {
  imex = { name = "imex", max_share = 0, flag_default = 1 },
  shared = { name = "shared", max_share = 1, flag_default = 0 },
  yes = { name = "yes", max_share = 4, flag_default = 0 },
  forced = { name = "forced", max_share = 32768 + 2, flag_default = 0 },
}
local function job(partition, shared, imex_env)
  local env = imex_env == false and { [0] = "OTHER=1" } or { [0] = "X=1", [1] = "IMEX=1" }
  return { partition = partition, shared = shared or 65534, spank_job_env = env, user_id = 1001 }
end
local function submit(j)
  user_msgs = {}
  return slurm_job_submit(j, parts, 1001)
end

write_config('[imex]\ndomain = "job"\n')
local j = job("shared")
check(submit(j) == slurm.SUCCESS and j.shared == 0, "shared partition: made whole-node")
j = job("yes", 1)
check(submit(j) == slurm.SUCCESS and j.shared == 0, "--oversubscribe in YES: made whole-node")
j = job(nil)
check(submit(j) == slurm.SUCCESS and j.shared == 65534, "the default partition is EXCLUSIVE: untouched")
j = job("forced", 0)
check(submit(j) == slurm.ERROR and j.shared == 0, "FORCE refuses even --exclusive")
check(user_msgs[1] == "slurm-imex: --imex needs whole nodes (one IMEX domain per job), and partition forced shares them (OverSubscribe=FORCE): submit to a partition without FORCE", "the FORCE line: " .. tostring(user_msgs[1]))
j = job("shared,forced")
check(submit(j) == slurm.ERROR, "a list naming a FORCE partition")
j = job("shared", nil, false)
check(submit(j) == slurm.SUCCESS and j.shared == 65534, "no --imex: untouched")
j = job("forced", nil, false)
check(submit(j) == slurm.SUCCESS, "no --imex in FORCE: untouched")
j = { partition = "shared", shared = 65534 }
check(submit(j) == slurm.SUCCESS and j.shared == 65534, "no SPANK environment at all")

write_config('[imex]\nshared_nodes = "refuse"\n')
j = job("shared")
check(submit(j) == slurm.ERROR and j.shared == 65534, "refuse: refused, not changed")
check(user_msgs[1] == "slurm-imex: --imex needs whole nodes (one IMEX domain per job): add --exclusive", "the refuse line")
j = job("shared", 0)
check(submit(j) == slurm.SUCCESS, "refuse: --exclusive passes")
j = job("imex")
check(submit(j) == slurm.SUCCESS, "refuse: an EXCLUSIVE partition passes")

write_config('[imex]\ndomain = "rack"\n')
j = job("forced", 1)
check(submit(j) == slurm.SUCCESS and j.shared == 1, "rack-wide domains: untouched, even in FORCE")

os.remove(config_dir .. "/imex.toml")
j = job("shared")
check(submit(j) == slurm.SUCCESS and j.shared == 0, "no imex.toml: the per-job default")

-- job_modify.
write_config('[imex]\ndomain = "job"\n')
local rec = { job_id = 7.0, spank_job_env = { [0] = "IMEX=1" } }
local function modify(desc)
  user_msgs = {}
  return slurm_job_modify(desc, rec, parts, 1001)
end
check(modify({ shared = 65534 }) == slurm.SUCCESS, "modify: an unrelated change")
check(modify({ shared = 1 }) == slurm.ERROR, "modify: OverSubscribe=YES refused")
check(user_msgs[1] == "slurm-imex: job 7 is an --imex job (one IMEX domain per job) and keeps whole nodes: OverSubscribe stays off", "modify: names the job: " .. tostring(user_msgs[1]))
check(modify({ shared = 0 }) == slurm.SUCCESS, "modify: --exclusive kept")
check(modify({ shared = 65534, partition = "forced" }) == slurm.ERROR, "modify: to a FORCE partition refused")
check(modify({ shared = 65534, partition = "shared" }) == slurm.SUCCESS, "modify: to a sharing partition (still whole-node)")
rec = { job_id = 8, spank_job_env = { [0] = "OTHER=1" } }
check(modify({ shared = 1 }) == slurm.SUCCESS, "modify: a job without --imex")

-- Reading the file: it never waits, reads a bounded amount, and keeps the
-- strict defaults on anything but a regular file it read whole. Each read
-- runs in a child interpreter under `timeout 20` with $SLURM_IMEX_CONFIG
-- set; a reader that waits on a FIFO fails there instead of hanging.
local lua = arg[-1] or "lua"
local function quote(text) return "'" .. text:gsub("'", "'\\''") .. "'" end
local function shell(command)
  local pipe = io.popen(command)
  local out = pipe:read("*a")
  pipe:close()
  return out
end
local function now() return tonumber(shell("date +%s%N")) / 1e9 end
local child_s = 0 -- the longest a child took
local function read_in_child(path, times, as)
  local start = now()
  local out = shell((as or "") .. "env SLURM_IMEX_CONFIG=" .. quote(path) .. " timeout 20 " .. quote(lua)
    .. " tests/lua/job_submit_test.lua --read " .. (times or 1) .. " 2>&1")
  child_s = math.max(child_s, now() - start)
  return out
end
-- A process in the background for at most 120 s; its pid.
local function background(command)
  return shell("(timeout 120 sh -c " .. quote(command) .. " >/dev/null 2>&1 & echo $!)"):match("%d+")
end

local rack_text = '[imex]\ndomain = "rack"\nshared_nodes = "refuse"\n'
local dir = config_dir .. "/kinds"
os.execute("mkdir -p " .. quote(dir))
local function put(name, text)
  local f = assert(io.open(dir .. "/" .. name, "wb"))
  f:write(text)
  f:close()
  return dir .. "/" .. name
end
local regular = put("rack.toml", rack_text)
check(read_in_child(regular) == "rack refuse\n", "a regular file: read")
check(read_in_child("conf-examples/imex.toml") == "job exclusive\n", "the shipped imex.toml, read from its file")
os.execute("ln -s rack.toml " .. quote(dir .. "/link-to-file"))
check(read_in_child(dir .. "/link-to-file") == "rack refuse\n", "a symlink to a regular file: read (as the programs do)")
check(read_in_child(put("big.toml", padded(rack_text, cap + 1))) == "job exclusive\n", "a file over the cap")
check(read_in_child(put("cap.toml", padded(rack_text, cap))) == "rack refuse\n", "a file of the cap")
check(read_in_child(put("given-up.toml", rack_text .. 'x = """\n"""\n')) == "job exclusive\n", "a file it gives up on")

os.execute("mkfifo " .. quote(dir .. "/fifo") .. " " .. quote(dir .. "/held-fifo"))
os.execute("ln -s fifo " .. quote(dir .. "/link-to-fifo"))
os.execute("mkdir " .. quote(dir .. "/directory"))
local writer = background("exec sleep 60 3<>" .. quote(dir .. "/held-fifo"))
for _, case in ipairs({
  { dir .. "/fifo", "a FIFO" },
  { dir .. "/held-fifo", "a FIFO a writer holds open" },
  { dir .. "/link-to-fifo", "a symlink to a FIFO" },
  { "/dev/zero", "/dev/zero" },
  { "/dev/urandom", "/dev/urandom" },
  { "/dev/null", "/dev/null" },
  { dir .. "/directory", "a directory" },
  { dir .. "/missing", "a missing file" },
  { dir .. "/missing/imex.toml", "a path through a missing directory" },
}) do
  check(read_in_child(case[1]) == "job exclusive\n", "the strict defaults, at once, for " .. case[2])
end

-- A file root may read but the reader may not (slurmctld runs as SlurmUser).
local unreadable = put("unreadable.toml", rack_text)
os.execute("chmod 000 " .. quote(unreadable) .. "; chmod 755 " .. quote(config_dir))
local as_nobody = ""
if shell("id -u") == "0\n" then as_nobody = "setpriv --reuid=65534 --regid=65534 --clear-groups " end
check(read_in_child(regular, 1, as_nobody) == "rack refuse\n", "a readable file, read by nobody")
check(read_in_child(unreadable, 1, as_nobody) == "job exclusive\n", "an unreadable file")

-- A path the shell would split or run, quoted: read, nothing run.
local odd = dir .. "/it's a \"$(touch job_submit_test_pwned)\" `touch job_submit_test_pwned`; x"
os.execute("mkdir -p " .. quote(odd))
local f = assert(io.open(odd .. "/imex.toml", "wb"))
f:write(rack_text)
f:close()
check(read_in_child(odd .. "/imex.toml") == "rack refuse\n", "a path with quotes, $( ), backquotes and ;")
check(not io.open("job_submit_test_pwned"), "nothing in the path was run")
os.remove("job_submit_test_pwned")

-- The file swapped for a FIFO (held open, no data) while it is read: every
-- read answers at once, with the file's settings or the strict defaults.
os.execute("ln -s rack.toml " .. quote(dir .. "/swapped"))
local swapper = background("cd " .. quote(dir) .. " && while :; do ln -sfn held-fifo swapped; ln -sfn rack.toml swapped; done")
local answers = read_in_child(dir .. "/swapped", 100)
os.execute("kill " .. swapper .. " 2>/dev/null")
local lines, others = 0, 0
for line in answers:gmatch("[^\n]*\n") do
  lines = lines + 1
  if line ~= "rack refuse\n" and line ~= "job exclusive\n" then others = others + 1 end
end
check(lines == 100 and others == 0, "100 reads of a file swapped with a FIFO, each answered: " .. answers:sub(1, 200))
os.execute("kill " .. writer .. " 2>/dev/null")
check(child_s < 10, string.format("every read answered within 10 s (the longest took %.1f s)", child_s))

-- The child itself: where it cannot run, or its output lacks the mark
-- echoed after a whole read (killed by timeout, dd failing midway), the
-- strict defaults; with the mark, its text read.
local real_popen = io.popen
local function popen_giving(out)
  return function() return { read = function() return out end, close = function() return true end } end
end
write_config(rack_text)
for _, case in ipairs({
  { function() error("popen not supported") end, "job", "io.popen failing" },
  { function() return nil, "no child" end, "job", "io.popen giving no pipe" },
  { popen_giving(rack_text), "job", "a read without the mark" },
  { popen_giving(rack_text .. "slurm-imex: read"), "job", "a read with the mark cut" },
  { popen_giving(""), "job", "no output" },
  { popen_giving(rack_text .. "slurm-imex: read\n"), "rack", "a read with the mark" },
}) do
  io.popen = case[1]
  local ok, got = pcall(imex.settings)
  io.popen = real_popen
  check(ok and got.domain == case[2], "settings() with " .. case[3] .. ": " .. (ok and got.domain or tostring(got)))
end

os.execute("rm -rf " .. quote(config_dir))
print(string.format("job_submit.lua: %d checks, %d failed", count, failures))
if failures > 0 then os.exit(1) end
