--[[
slurm-imex's job_submit.lua: an --imex job never starts on a node that
another job shares (docs/shared-nodes.md).

One node runs one nvidia-imex daemon, so with per-job IMEX domains
([imex] domain = "job", the default) a node serves one job's domain at a
time. Under select/cons_tres even OverSubscribe=NO lets two jobs share a
node; the second --imex job there would be started and then fail at its
first task. This script, run by slurmctld at submission, makes every --imex
job whole-node (as --exclusive does) instead, so it waits for a free node.
It refuses the job, in one line, where it cannot be whole-node: a partition
with OverSubscribe=FORCE (the partition wins over --exclusive), or when the
site chose [imex] shared_nodes = "refuse" (then users add --exclusive). In
rack-wide domains ([imex] domain = "rack"), jobs share one long-lived domain
with a channel each, so --imex jobs may share nodes and pass untouched.

Install: copy it beside slurm.conf as job_submit.lua and set
JobSubmitPlugins=lua in slurm.conf (then `scontrol reconfigure`). If you
have a job_submit.lua already, paste the `slurm_imex` block below into it
and call slurm_imex.submit and slurm_imex.modify first from your
slurm_job_submit and slurm_job_modify, returning their error.
`slurm-imex doctor --cluster` checks both.

The settings come from imex.toml beside this file ($SLURM_IMEX_CONFIG when
slurmctld has it), read at each --imex submission, so a change needs no
reconfigure. Jobs without --imex cost one table lookup.
--]]

-- BEGIN slurm_imex (keep this block whole when pasting it elsewhere)
local slurm_imex = {}

-- slurm.h: a partition's max_share has SHARED_FORCE (0x8000) set for
-- OverSubscribe=FORCE, and is 0 for OverSubscribe=EXCLUSIVE; a job's
-- shared is JOB_SHARED_NONE (0) for --exclusive, NO_VAL16 when unset.
local SHARED_FORCE = 32768
local JOB_SHARED_NONE = 0
local NO_VAL16 = slurm.NO_VAL16 or 65534
-- imex.toml is a few KiB; a larger file is not read.
local MAX_CONFIG_BYTES = 1048576

-- The directory this script was loaded from (slurmctld loads it from
-- Slurm's sysconfdir, beside slurm.conf).
local function script_dir()
  local source = debug.getinfo(1, "S").source or ""
  return source:match("^@(.*)/[^/]*$") or "/etc/slurm"
end

function slurm_imex.config_path()
  local env = os.getenv("SLURM_IMEX_CONFIG")
  if env and env ~= "" then return env end
  return script_dir() .. "/imex.toml"
end

-- The two keys of [imex] this script uses, from the text of imex.toml.
-- Read by hand: slurmctld's Lua has no TOML library and loads this one
-- file. Only `key = "value"` lines directly under [imex] are read; the
-- programs validate the whole file (slurm-imex doctor), so here anything
-- else keeps the default, the strict per-job behaviour.
function slurm_imex.settings_of(text)
  local settings = { domain = "job", shared_nodes = "exclusive" }
  local section = ""
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    local header = line:match("^%s*%[%s*([%w_%.%-]+)%s*%]%s*$")
      or line:match("^%s*%[%s*([%w_%.%-]+)%s*%]%s*#")
    if header then
      section = header
    elseif section == "imex" then
      local key, value = line:match("^%s*([%w_]+)%s*=%s*[\"']([^\"']*)[\"']%s*$")
      if not key then
        key, value = line:match("^%s*([%w_]+)%s*=%s*[\"']([^\"']*)[\"']%s*#")
      end
      if key == "domain" and (value == "job" or value == "rack") then
        settings.domain = value
      elseif key == "shared_nodes" and (value == "exclusive" or value == "refuse") then
        settings.shared_nodes = value
      end
    end
  end
  return settings
end

function slurm_imex.settings()
  local file = io.open(slurm_imex.config_path(), "r")
  if not file then return slurm_imex.settings_of("") end
  local text = file:read(MAX_CONFIG_BYTES) or ""
  file:close()
  return slurm_imex.settings_of(text)
end

-- Whether a job's SPANK environment holds the plugin's IMEX=1 (--imex).
function slurm_imex.asked(spank_job_env)
  if type(spank_job_env) ~= "table" then return false end
  for _, entry in pairs(spank_job_env) do
    if entry == "IMEX=1" then return true end
  end
  return false
end

-- The partitions a job may run in: those it names, else the default one.
local function partitions_of(names, part_list)
  local found = {}
  if names and names ~= "" then
    for name in names:gmatch("[^,]+") do
      if part_list[name] then table.insert(found, part_list[name]) end
    end
  else
    for _, part in pairs(part_list) do
      if part.flag_default == 1 or part.flag_default == true then table.insert(found, part) end
    end
  end
  return found
end

local function forces_sharing(part)
  local share = tonumber(part.max_share) or 0
  return math.floor(share / SHARED_FORCE) % 2 == 1
end

-- The first partition among `names` (else the default) that forces sharing.
local function forcing_partition(names, part_list)
  for _, part in ipairs(partitions_of(names, part_list or {})) do
    if forces_sharing(part) then return part.name end
  end
  return nil
end

-- Whether every partition the job may run in is OverSubscribe=EXCLUSIVE.
-- Slurm 26.05's Exclusive=NODE is not shown to job_submit/lua (max_share
-- reads 1 there), so such a partition counts as one that may share.
local function whole_node_partitions(names, part_list)
  local parts = partitions_of(names, part_list or {})
  if #parts == 0 then return false end
  for _, part in ipairs(parts) do
    if tonumber(part.max_share) ~= 0 then return false end
  end
  return true
end

-- A number as Slurm writes it ("2", not Lua 5.3's "2.0" for a float).
local function int(n)
  return string.format("%d", tonumber(n) or 0)
end

local function refuse(message)
  slurm.log_user("slurm-imex: %s", message)
  return slurm.ERROR
end

-- At submission: an --imex job in per-job domains leaves whole-node, or
-- is refused in one line.
function slurm_imex.submit(job_desc, part_list)
  if not slurm_imex.asked(job_desc.spank_job_env) then return slurm.SUCCESS end
  local settings = slurm_imex.settings()
  if settings.domain == "rack" then return slurm.SUCCESS end
  local forcing = forcing_partition(job_desc.partition, part_list)
  if forcing then
    return refuse("--imex needs whole nodes (one IMEX domain per job), and partition "
      .. forcing .. " shares them (OverSubscribe=FORCE): submit to a partition without FORCE")
  end
  if job_desc.shared == JOB_SHARED_NONE or whole_node_partitions(job_desc.partition, part_list) then
    return slurm.SUCCESS
  end
  if settings.shared_nodes == "refuse" then
    return refuse("--imex needs whole nodes (one IMEX domain per job): add --exclusive")
  end
  job_desc.shared = JOB_SHARED_NONE
  slurm.log_debug("slurm-imex: --imex job of uid %s made whole-node", int(job_desc.user_id))
  return slurm.SUCCESS
end

-- On `scontrol update` of a pending --imex job: it keeps whole nodes.
function slurm_imex.modify(job_desc, job_rec, part_list)
  if not slurm_imex.asked(job_rec.spank_job_env) then return slurm.SUCCESS end
  if slurm_imex.settings().domain == "rack" then return slurm.SUCCESS end
  local shared = job_desc.shared
  if shared ~= nil and shared ~= NO_VAL16 and shared ~= JOB_SHARED_NONE then
    return refuse("job " .. int(job_rec.job_id)
      .. " is an --imex job (one IMEX domain per job) and keeps whole nodes: OverSubscribe stays off")
  end
  if job_desc.partition and job_desc.partition ~= "" then
    local forcing = forcing_partition(job_desc.partition, part_list)
    if forcing then
      return refuse("job " .. int(job_rec.job_id) .. " is an --imex job and needs whole nodes, and partition "
        .. forcing .. " shares them (OverSubscribe=FORCE): choose a partition without FORCE")
    end
  end
  return slurm.SUCCESS
end
-- END slurm_imex

function slurm_job_submit(job_desc, part_list, submit_uid)
  return slurm_imex.submit(job_desc, part_list)
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
  return slurm_imex.modify(job_desc, job_rec, part_list)
end

return slurm.SUCCESS
