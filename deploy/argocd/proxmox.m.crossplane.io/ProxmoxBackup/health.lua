-- Argo CD health check for ProxmoxBackup (proxmox.m.crossplane.io).
--
-- Healthy      Ready=True and status.observedGeneration current: the
--              archive exists as the spec asks and no task is in flight.
-- Suspended    managementPolicies is [] or crossplane.io/paused is "true"
--              (the backup controller reads both).
-- Degraded     Synced or Ready is False for a failure reason (a vzdump
--              task that failed, an archive that is not this resource's,
--              a missing config, ...); the message is the condition's.
-- Progressing  everything else: no status yet, a generation not observed
--              yet, a vzdump or delete task running (with its progress),
--              the guest locked or without a VMID yet, a deletion.
--
-- Written for Argo CD's Lua: gopher-lua (Lua 5.1) with only the base,
-- package and table libraries open (no string or math library unless the
-- customization sets useOpenLibs), and tested with it and with Lua 5.4.

local failure_reasons = {
  ReconcileError = true,
  TaskFailed = true,
  NotOwned = true,
  ProviderConfigNotFound = true,
  InvalidSpec = true,
  Forbidden = true,
}

local function condition(type)
  if obj.status == nil or obj.status.conditions == nil then
    return nil
  end
  for _, c in ipairs(obj.status.conditions) do
    if c.type == type then
      return c
    end
  end
  return nil
end

local function describe(c)
  if c.message ~= nil and c.message ~= "" then
    return c.reason .. ": " .. c.message
  end
  return c.reason
end

local function paused()
  local annotations = obj.metadata.annotations
  if annotations ~= nil and annotations["crossplane.io/paused"] == "true" then
    return "Reconciliation is paused: crossplane.io/paused is true"
  end
  local policies = obj.spec ~= nil and obj.spec.managementPolicies or nil
  if type(policies) == "table" and next(policies) == nil then
    return "Reconciliation is paused: managementPolicies is empty"
  end
  return nil
end

local function healthy_message()
  local at = obj.status.atProvider or {}
  local text = "Backup of " .. tostring(obj.spec.forProvider.guestRef.name)
  if at.volume ~= nil then
    text = text .. ": " .. at.volume
  end
  if at.ctime ~= nil then
    text = text .. ", taken " .. at.ctime
  end
  if at.protected then
    text = text .. ", protected"
  end
  return text
end

local function task_message()
  local task = obj.status.atProvider ~= nil and obj.status.atProvider.task or nil
  if task == nil then
    return nil
  end
  return "Task " .. tostring(task.summary) .. " running (" .. tostring(task.upid) .. ")"
end

local hs = {}

local why_paused = paused()
if why_paused ~= nil then
  hs.status = "Suspended"
  hs.message = why_paused
  return hs
end

if obj.status == nil or obj.status.conditions == nil or next(obj.status.conditions) == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the provider to report the backup's state"
  return hs
end

local generation = obj.metadata.generation
local observed = obj.status.observedGeneration
if generation ~= nil and (observed == nil or observed < generation) then
  hs.status = "Progressing"
  hs.message = "Waiting for the provider to act on generation " .. tostring(generation)
  return hs
end

local synced = condition("Synced")
local ready = condition("Ready")

local function failed(c)
  return c ~= nil and c.status == "False" and failure_reasons[c.reason] == true
end
if failed(synced) or failed(ready) then
  hs.status = "Degraded"
  hs.message = describe(failed(synced) and synced or ready)
  return hs
end

if ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = healthy_message()
  return hs
end

hs.status = "Progressing"
local running = task_message()
if running ~= nil then
  hs.message = running
elseif synced ~= nil and synced.status == "False" then
  hs.message = describe(synced)
elseif ready ~= nil then
  hs.message = describe(ready)
else
  hs.message = "Waiting for the provider to report the backup's state"
end
return hs
