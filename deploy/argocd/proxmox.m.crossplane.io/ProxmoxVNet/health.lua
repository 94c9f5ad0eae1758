-- Argo CD health check for ProxmoxVNet (proxmox.m.crossplane.io).
--
-- Healthy      Ready=True and status.observedGeneration current: the VNet
--              exists on Proxmox as the spec asks and its last change is
--              applied (a change pending the cluster-wide SDN apply is
--              Ready=False, Progressing).
-- Suspended    managementPolicies is [] or crossplane.io/paused is "true"
--              (the controller reads both).
-- Degraded     Synced or Ready is False for a failure reason (a change
--              Proxmox refuses, an invalid spec, a missing or forbidden
--              config, ...); the message is
--              the condition's.
-- Progressing  everything else: no status yet, a generation not observed
--              yet, being created or corrected, pending or being applied,
--              and a deletion.
--
-- Written for Argo CD's Lua: gopher-lua (Lua 5.1) with only the base,
-- package and table libraries open (no string or math library unless the
-- customization sets useOpenLibs), and tested with it and with Lua 5.4.

local failure_reasons = {
  ReconcileError = true,
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
  local text = "VNet " .. tostring(at.id or obj.metadata.name) .. " in zone " .. tostring(at.zone)
  local subnets = at.subnets or 0
  if subnets == 1 then
    return text .. " with 1 subnet, applied"
  end
  return text .. " with " .. tostring(subnets) .. " subnets, applied"
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
  hs.message = "Waiting for the provider to report the VNet's state"
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
if synced ~= nil and synced.status == "False" then
  hs.message = describe(synced)
elseif ready ~= nil then
  hs.message = describe(ready)
else
  hs.message = "Waiting for the provider to report the VNet's state"
end
return hs
