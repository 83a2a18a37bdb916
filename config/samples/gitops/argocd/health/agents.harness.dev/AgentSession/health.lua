hs = {}
if obj.status == nil or obj.status.observedGeneration == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the planmode manager to observe the session"
  return hs
end
if obj.metadata.generation ~= nil and obj.status.observedGeneration ~= obj.metadata.generation then
  hs.status = "Progressing"
  hs.message = "The manager has not observed generation " .. obj.metadata.generation .. " yet"
  return hs
end
if obj.status.conditions ~= nil then
  for _, c in ipairs(obj.status.conditions) do
    if c.type == "Stalled" and c.status == "True" then
      hs.status = "Degraded"
      hs.message = c.reason .. ": " .. (c.message or "")
      return hs
    end
  end
  for _, c in ipairs(obj.status.conditions) do
    if c.type == "AwaitingReview" and c.status == "True" then
      hs.status = "Suspended"
      hs.message = c.message or c.reason
      return hs
    end
  end
  for _, c in ipairs(obj.status.conditions) do
    if c.type == "Reconciling" and c.status == "True" then
      hs.status = "Progressing"
      hs.message = c.message or c.reason
      return hs
    end
  end
  for _, c in ipairs(obj.status.conditions) do
    if c.type == "Ready" then
      if c.status == "True" then
        hs.status = "Healthy"
      else
        hs.status = "Progressing"
      end
      hs.message = c.message or c.reason
      return hs
    end
  end
end
hs.status = "Progressing"
hs.message = "No Ready condition yet"
return hs
