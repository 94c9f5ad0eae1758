-- Argo CD health check for ProxmoxImage (proxmox.m.crossplane.io).
--
-- Healthy      Ready=True and status.observedGeneration current: the file
--              is on every location (and the template VMs exist when asked).
-- Degraded     Synced or Ready is False for a failure reason (an invalid
--              spec, a failed download waiting out its backoff, a missing
--              importFrom volume, a deletion blocked by the VMs that still
--              use the image, ...); the message is the condition's.
-- Progressing  everything else: no status yet, a generation not observed
--              yet, downloads running (with their percent), template VMs
--              being made, deletion.
--
-- Suspended    reconciliation is paused (crossplane.io/paused: "true" or
--              managementPolicies: [], as for every kind).
--
-- Written for Argo CD's Lua: gopher-lua (Lua 5.1) with only the base,
-- package and table libraries open (no string or math library unless the
-- customization sets useOpenLibs), and tested with it and with Lua 5.4.

local failure_reasons = {
  ReconcileError = true,
  TaskFailed = true,
  ProviderConfigNotFound = true,
  InvalidSpec = true,
  VolumeNotFound = true,
  OciNeedsPve91 = true,
  ImageInUse = true,
  NotAllowed = true,
  Forbidden = true,
  InsufficientStorage = true,
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

local function at_provider()
  return obj.status.atProvider or {}
end

-- "Downloading the image: pve 42%, pve2 (3/4 ready)", from the downloads in
-- flight; nil when none is.
local function download_message()
  local at = at_provider()
  if at.locations == nil then
    return nil
  end
  local parts = nil
  for _, loc in ipairs(at.locations) do
    if loc.task ~= nil and loc.task.action == "DownloadImage" then
      local part = tostring(loc.node)
      if loc.task.progress ~= nil then
        part = part .. " " .. tostring(loc.task.progress) .. "%"
      end
      if parts == nil then
        parts = part
      else
        parts = parts .. ", " .. part
      end
    end
  end
  if parts == nil then
    return nil
  end
  local text = "Downloading the image: " .. parts
  if at.summary ~= nil then
    text = text .. " (" .. at.summary .. ")"
  end
  return text
end

local function healthy_message()
  local at = at_provider()
  local text = tostring(at.volume or "Image")
  if at.summary ~= nil then
    text = text .. ": " .. at.summary
  else
    text = text .. " available"
  end
  if at.templateSummary ~= nil then
    text = text .. ", templates " .. at.templateSummary
  end
  return text
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
  return nil
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
  hs.message = "Waiting for the provider to report the image's state"
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

if obj.metadata.deletionTimestamp ~= nil then
  hs.status = "Progressing"
  if synced ~= nil and synced.message ~= nil and synced.message ~= "" then
    hs.message = describe(synced)
  else
    hs.message = "Deleting the image"
  end
  return hs
end

if ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = healthy_message()
  return hs
end

hs.status = "Progressing"
hs.message = download_message()
if hs.message == nil then
  if ready ~= nil then
    hs.message = describe(ready)
  elseif synced ~= nil then
    hs.message = describe(synced)
  else
    hs.message = "Waiting for the provider to report the image's state"
  end
end
return hs
