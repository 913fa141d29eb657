-- Unit tests of conf-examples/job_submit.lua under a plain Lua (5.1, the
-- oldest Slurm links): its decisions for each kind of job and partition,
-- and its reading of imex.toml, with a `slurm` table standing in for the
-- one slurmctld provides (tests/e2e/shared-nodes.sh runs it in slurmctld).
-- Run: lua5.1 tests/lua/job_submit_test.lua (from the repository root).

local user_msgs = {}
slurm = {
  SUCCESS = 0, ERROR = -1, NO_VAL16 = 65534,
  log_user = function(fmt, ...) table.insert(user_msgs, string.format(fmt, ...)) end,
  log_debug = function() end,
}
local config_dir = os.tmpname()
os.remove(config_dir)
os.execute("mkdir -p " .. config_dir)
local function write_config(text)
  local f = assert(io.open(config_dir .. "/imex.toml", "w"))
  f:write(text)
  f:close()
end
-- The script finds imex.toml through $SLURM_IMEX_CONFIG when slurmctld has
-- it; plain Lua cannot set the environment, so point config_path there.
dofile("conf-examples/job_submit.lua")
assert(type(slurm_job_submit) == "function" and type(slurm_job_modify) == "function")

-- The block is local to the script; reach it through the functions' upvalues.
local imex
for i = 1, 20 do
  local name, value = debug.getupvalue(slurm_job_submit, i)
  if name == "slurm_imex" then imex = value end
end
assert(imex, "slurm_imex is an upvalue of slurm_job_submit")
imex.config_path = function() return config_dir .. "/imex.toml" end

local failures, count = 0, 0
local function check(ok, what)
  count = count + 1
  if not ok then failures = failures + 1; print("FAIL: " .. what) end
end

-- imex.toml as the script reads it.
local s = imex.settings_of('[imex]\ndomain = "rack"\nshared_nodes = "refuse"\n')
check(s.domain == "rack" and s.shared_nodes == "refuse", "both keys read")
s = imex.settings_of('[imex] # the IMEX section\ndomain = "rack" # rack-wide\n')
check(s.domain == "rack", "comments after a header and a value")
s = imex.settings_of("[imex]\n  domain='rack'\n")
check(s.domain == "rack", "single quotes and indentation")
s = imex.settings_of('[imex.daemon]\ndomain = "rack"\n[imex]\n')
check(s.domain == "job", "a key of another table is not [imex]'s")
s = imex.settings_of('[slurm]\ndomain = "rack"\n')
check(s.domain == "job", "a key of [slurm] is not [imex]'s")
s = imex.settings_of('[imex]\ndomain = "everything"\nshared_nodes = 3\n')
check(s.domain == "job" and s.shared_nodes == "exclusive", "bad values keep the strict defaults")
s = imex.settings_of("\0\255[imex\n= = =\n")
check(s.domain == "job", "garbage keeps the defaults")
-- The shipped imex.toml, as is and with its two keys changed.
local shipped = assert(io.open("conf-examples/imex.toml")):read("*a")
s = imex.settings_of(shipped)
check(s.domain == "job" and s.shared_nodes == "exclusive", "the shipped imex.toml: the defaults")
s = imex.settings_of(shipped:gsub('\ndomain = "job"', '\ndomain = "rack"'):gsub('\nshared_nodes = "exclusive"', '\nshared_nodes = "refuse"'))
check(s.domain == "rack" and s.shared_nodes == "refuse", "the shipped imex.toml with rack and refuse")
s = imex.settings_of("")
check(s.domain == "job" and s.shared_nodes == "exclusive", "an empty file")

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

os.execute("rm -rf " .. config_dir)
print(string.format("job_submit.lua: %d checks, %d failed", count, failures))
if failures > 0 then os.exit(1) end
