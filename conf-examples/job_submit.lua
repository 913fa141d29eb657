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
-- imex.toml is a few KiB; the programs refuse one over 1 MiB, and so does
-- this script (it keeps the strict default).
local MAX_CONFIG_BYTES = 1048576
-- The longest a read of imex.toml may take (a hung NFS mount under
-- /etc/slurm) before the strict default is kept; a read takes milliseconds.
local READ_TIMEOUT_S = 2

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

-- The two keys of [imex] this script uses, from the text of imex.toml, and
-- nil; or the strict defaults and why it gave up.
--
-- Read by hand: slurmctld's Lua has no TOML library, and this script is one
-- file Slurm loads. So it reads only what it can read with certainty, as
-- TOML reads it, and gives up on the rest, keeping the strict per-job
-- defaults for the whole file (docs/shared-nodes.md): a reader that guessed
-- could take a line inside a multi-line string for a header or a key, and
-- let an --imex job share a node. It is no validator (`slurm-imex doctor`
-- checks the whole file). It reads, line by line after a UTF-8 BOM, blank
-- lines, comments, `[a.b]` headers of up to four bare names (imex.toml's
-- tables have two), and `bare_key = value` where the value is a one-line
-- string, a number or a boolean, a comment after it or not. It gives up on
-- anything else: a multi-line string (three quotes) anywhere, an array, an
-- inline table, a dotted or quoted key, [[array.tables]], a key or table
-- defined twice, a byte that is not UTF-8 or a control byte (CRLF line ends
-- are read), a file over MAX_CONFIG_BYTES, and a domain or shared_nodes
-- that is not one of its plain values.
local KNOWN = { domain = { job = true, rack = true }, shared_nodes = { exclusive = true, refuse = true } }
local UTF8 = { "^[\194-\223][\128-\191]", "^\224[\160-\191][\128-\191]",
  "^[\225-\236\238\239][\128-\191][\128-\191]", "^\237[\128-\159][\128-\191]",
  "^\240[\144-\191][\128-\191][\128-\191]", "^[\241-\243][\128-\191][\128-\191][\128-\191]",
  "^\244[\128-\143][\128-\191][\128-\191]" }

-- Whether text is UTF-8 without control bytes but tab and newline: each
-- run of other bytes than those and printable ASCII is whole characters.
local function plain_utf8(text)
  for run in text:gmatch("[^\t\n -~]+") do
    local at = 1
    while at <= #run do
      local last
      for _, character in ipairs(UTF8) do
        last = select(2, run:find(character, at))
        if last then break end
      end
      if not last then return false end
      at = last + 1
    end
  end
  return true
end

-- A one-line value (what follows `key =`): a string's text, or true for a
-- number or boolean; nil for anything else.
local function value_of(rest)
  local first, value, after = rest:sub(1, 1), nil, nil
  if first == '"' then
    if rest:sub(1, 3) == '"""' then return nil end
    local i = 2
    while not after do -- the closing quote, escapes skipped
      local j = rest:find('["\\]', i)
      if not j then return nil end
      if rest:sub(j, j) == '"' then value, after = rest:sub(2, j - 1), j + 1 else i = j + 2 end
    end
    local unknown = value:gsub('\\[btnfre"\\]', ""):gsub("\\x%x%x", ""):gsub("\\u%x%x%x%x", "")
      :gsub("\\U%x%x%x%x%x%x%x%x", "")
    if unknown:find("\\", 1, true) then return nil end
  elseif first == "'" then
    if rest:sub(1, 3) == "'''" then return nil end
    after = rest:find("'", 2, true)
    if not after then return nil end
    value, after = rest:sub(2, after - 1), after + 1
  else
    local token = rest:match("^[A-Za-z0-9_:.+%-]+") or ""
    if not (token == "true" or token == "false" or token:find("^[+-]?[0-9]")
        or token:find("^[+-]?inf$") or token:find("^[+-]?nan$")) then return nil end
    value, after = true, #token + 1
  end
  if rest:find("^[ \t]*$", after) or rest:find("^[ \t]*#", after) then return value end
  return nil
end

function slurm_imex.settings_of(text)
  local settings = { domain = "job", shared_nodes = "exclusive" }
  local function give_up(why) return { domain = "job", shared_nodes = "exclusive" }, why end
  if #text > MAX_CONFIG_BYTES then return give_up("larger than " .. MAX_CONFIG_BYTES .. " bytes") end
  if text:sub(1, 3) == "\239\187\191" then text = text:sub(4) end
  if text:find("\r", 1, true) then text = text:gsub("\r\n", "\n") end
  if not plain_utf8(text) then return give_up("a control byte or a byte that is not UTF-8") end
  local section, defined, n = "", {}, 0
  local function at(why) return give_up("line " .. n .. ": " .. why) end
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    n = n + 1
    local name, rest = line:match("^[ \t]*%[([^%[%]]*)%][ \t]*(.*)$")
    if line:find("^[ \t]*$") or line:find("^[ \t]*#") then -- a blank line or a comment
    elseif name then -- [a.b]: bare names, a table not defined before
      if not (rest == "" or rest:find("^#")) then return at("a header") end
      local path, parts = "", 0
      for part in (name .. "."):gmatch("([^.]*)%.") do
        part, parts = part:match("^[ \t]*([A-Za-z0-9_%-]+)[ \t]*$"), parts + 1
        if not part or parts > 4 then return at("a header") end
        path = path == "" and part or path .. "." .. part
        if defined[path] == "key" then return at(path .. " defined twice") end
        defined[path] = defined[path] or "implied"
      end
      if defined[path] ~= "implied" then return at("[" .. path .. "] defined twice") end
      defined[path], section = "table", path
    else -- bare_key = one-line value, not defined before
      local key, value
      key, rest = line:match("^[ \t]*([A-Za-z0-9_%-]+)[ \t]*=[ \t]*(.*)$")
      if key then value = value_of(rest) end
      if value == nil then return at("not a blank line, comment, [header] or bare_key = one-line value") end
      local path = section == "" and key or section .. "." .. key
      if defined[path] then return at(path .. " defined twice") end
      defined[path] = "key"
      if section == "imex" and KNOWN[key] then
        if not KNOWN[key][value] then return at("[imex] " .. key .. " not read") end
        settings[key] = value
      end
    end
  end
  return settings, nil
end

-- imex.toml's text, or nil when it cannot be read at once, whole and
-- bounded. Plain Lua has no stat, and its io.open waits for a writer on a
-- FIFO (which would hang slurmctld), so a child reads it: `test -f` (a
-- regular file, through symlinks, as the programs require), then dd with
-- O_NONBLOCK (the open itself never waits, even for a FIFO swapped in after
-- the test) reading at most MAX_CONFIG_BYTES + 1 bytes (so /dev/zero ends),
-- all under `timeout` (a hung filesystem). Only output ending in the mark
-- echoed after dd succeeded counts. The path is the admin's, quoted anyway.
-- What this costs an --imex submission: docs/shared-nodes.md.
local READ_OK = "slurm-imex: read"
function slurm_imex.config_text(path)
  local command = "exec </dev/null 2>/dev/null; PATH=/usr/bin:/bin; export PATH; exec timeout -s KILL "
    .. READ_TIMEOUT_S .. " sh -c 'test -f \"$1\" && dd if=\"$1\" iflag=nonblock,fullblock bs="
    .. (MAX_CONFIG_BYTES + 1) .. " count=1 status=none && echo \"$2\"' sh '"
    .. path:gsub("'", "'\\''") .. "' '" .. READ_OK .. "'"
  local ok, pipe = pcall(io.popen, command, "r")
  if not ok or not pipe then return nil end
  local out = pipe:read("*a") or ""
  pipe:close()
  if out:sub(-#READ_OK - 1) ~= READ_OK .. "\n" then return nil end
  return out:sub(1, -#READ_OK - 2)
end

function slurm_imex.settings()
  return slurm_imex.settings_of(slurm_imex.config_text(slurm_imex.config_path()) or "")
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
