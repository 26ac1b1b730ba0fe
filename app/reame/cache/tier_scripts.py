"""The Lua scripts the shared tier runs on its server (cache/shared_store.py), so that a reply is
bounded whatever the server holds: a listing past its bounds reads as 0, never as megabytes."""

# Each hash's fields and values (flat), or 0 for a hash past the bounds or a key of another type:
# the reply is bounded whatever the server holds.
LISTING_SCRIPT = """
local out = {}
for i, key in ipairs(KEYS) do
  local kind = redis.call('TYPE', key)['ok']
  if kind == 'none' then
    out[i] = {}
  elseif kind ~= 'hash' or redis.call('HLEN', key) > tonumber(ARGV[1]) then
    out[i] = 0
  else
    local all = redis.call('HGETALL', key)
    for _, s in ipairs(all) do
      if #s > tonumber(ARGV[2]) then
        all = 0
        break
      end
    end
    out[i] = all
  end
end
return out
"""

# Each sorted set's newest ARGV[1] members, or 0 for a key of another type or a member past
# ARGV[2] bytes.
BRANCH_SCRIPT = """
local out = {}
for i, key in ipairs(KEYS) do
  local kind = redis.call('TYPE', key)['ok']
  if kind == 'none' then
    out[i] = {}
  elseif kind ~= 'zset' then
    out[i] = 0
  else
    local members = redis.call('ZREVRANGE', key, 0, tonumber(ARGV[1]) - 1)
    for _, m in ipairs(members) do
      if #m > tonumber(ARGV[2]) then
        members = 0
        break
      end
    end
    out[i] = members
  end
end
return out
"""
