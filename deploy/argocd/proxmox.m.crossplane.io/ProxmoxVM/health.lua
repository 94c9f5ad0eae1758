-- Argo CD health check for ProxmoxVM (proxmox.m.crossplane.io).
--
-- Healthy      Ready=True.
-- Suspended    reconciliation is paused (crossplane.io/paused: "true",
--              managementPolicies: [], or Synced=False/ReconcilePaused).
-- Degraded     Synced or Ready is False for a failure reason; the message
--              is the condition's.
-- Progressing  everything else: no status yet, a generation not observed
--              yet, a Proxmox task running (with its percent), a lock the
--              provider waits out, deletion.
--
-- Written for Argo CD's Lua: gopher-lua (Lua 5.1) with only the base,
-- package and table libraries open (no string or math library unless the
-- customization sets useOpenLibs), and tested with it and with Lua 5.4.

local failure_reasons = {
  ReconcileError = true,
  TaskFailed = true,
  TaskTimeout = true,
  NotOwned = true,
  ProviderConfigNotFound = true,
  SecretNotFound = true,
  TemplateNotFound = true,
  InvalidSpec = true,
  NotAllowed = true,
  InsufficientStorage = true,
  Forbidden = true,
}

-- What a running task of each action is doing, for the message.
local task_words = {
  DownloadImage = "Downloading the disk image",
  Create = "Creating the VM",
  Clone = "Cloning the template",
  Configure = "Updating the VM configuration",
  ResizeDisk = "Resizing a disk",
  Start = "Starting the VM",
  Shutdown = "Shutting down the VM",
  Stop = "Stopping the VM",
  Destroy = "Destroying the VM",
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
    return "Reconciliation is paused by the crossplane.io/paused annotation"
  end
  local policies = obj.spec ~= nil and obj.spec.managementPolicies or nil
  if type(policies) == "table" and next(policies) == nil then
    return "Reconciliation is paused: managementPolicies is empty"
  end
  local synced = condition("Synced")
  if synced ~= nil and synced.status == "False" and synced.reason == "ReconcilePaused" then
    return describe(synced)
  end
  return nil
end

-- "Importing the disk image: 42% (qmcreate on pve)", from the task in flight.
local function task_message(synced)
  local task = obj.status.atProvider ~= nil and obj.status.atProvider.task or nil
  if task == nil then
    return nil
  end
  local words = task_words[task.action] or ("Running " .. tostring(task.type))
  if synced ~= nil and synced.reason == "ImportingDisk" then
    words = "Importing the disk image"
  end
  if task.progress ~= nil then
    words = words .. ": " .. tostring(task.progress) .. "%"
  end
  return words .. " (" .. tostring(task.type) .. " on " .. tostring(task.node) .. ")"
end

local function healthy_message()
  local at = obj.status.atProvider or {}
  local text = "VM"
  if at.vmid ~= nil then
    text = text .. " " .. tostring(at.vmid)
  end
  if at.state ~= nil then
    text = text .. " " .. at.state
  else
    text = text .. " available"
  end
  if at.node ~= nil then
    text = text .. " on " .. at.node
  end
  if at.ipAddress ~= nil then
    text = text .. " at " .. at.ipAddress
  end
  return text
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
  hs.message = "Waiting for the provider to report the VM's state"
  return hs
end

local generation = obj.metadata.generation
local observed = obj.status.observedGeneration
if generation ~= nil and observed ~= nil and observed < generation then
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

if obj.metadata.deletionTimestamp ~= nil then
  hs.status = "Progressing"
  hs.message = task_message(synced) or "Deleting the VM"
  return hs
end

if ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = healthy_message()
  return hs
end

hs.status = "Progressing"
hs.message = task_message(synced)
if hs.message == nil then
  if synced ~= nil and synced.message ~= nil and synced.message ~= "" and synced.reason ~= "ReconcileSuccess" then
    hs.message = describe(synced)
  elseif ready ~= nil then
    hs.message = describe(ready)
  else
    hs.message = "Waiting for the provider to report the VM's state"
  end
end
return hs
