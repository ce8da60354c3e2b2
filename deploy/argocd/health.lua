-- Argo CD health for podcidr-bgp's configuration objects (BGPSpeakerConfig, BGPPeer):
-- their status is written by the allocator's leader, the one status writer of the cluster.
-- Healthy: Ready is True for the object's current generation. Progressing: no status yet,
-- the writer has not seen this generation, or a session-resetting edit still rolls out in
-- waves (reason RolloutProgressing). Degraded: Ready is False for any other reason (an
-- invalid value, a missing Secret key, a conflict, a stalled rollout), with the writer's
-- message. speaker/tests/tools/argocd_health.rs runs this file in gopher-lua (the Lua VM Argo CD
-- runs it in) on objects the status writer produced.
local hs = {}
if obj.status == nil or obj.status.conditions == nil then
  hs.status = "Progressing"
  hs.message = "No status yet: the podcidr-bgp allocator's leader writes it"
  return hs
end
local generation = obj.metadata.generation
local observed = obj.status.observedGeneration
if generation ~= nil and (observed == nil or observed < generation) then
  hs.status = "Progressing"
  hs.message = "Generation " .. tostring(generation) .. " not checked yet"
  return hs
end
for _, condition in ipairs(obj.status.conditions) do
  if condition.type == "Ready" then
    if condition.status == "True" then
      hs.status = "Healthy"
    elseif condition.reason == "RolloutProgressing" then
      hs.status = "Progressing"
    else
      hs.status = "Degraded"
    end
    hs.message = condition.message
    return hs
  end
end
hs.status = "Progressing"
hs.message = "No Ready condition yet"
return hs
