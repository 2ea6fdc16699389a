import { createHash } from 'node:crypto';

/**
 * The whole decision in one Lua script, so read-refill-take-write is atomic in Redis even with
 * many gateway replicas calling at once. It is a transcription of `in-process/token-bucket.ts`
 * (same rules, same rounding); the shared contract suite holds the two together.
 *
 * The clock is Redis `TIME`, never the caller's: replicas with skewed clocks still agree on how
 * much a bucket has refilled. (Redis 5+ replicates scripts by effects, which is what makes a
 * non-deterministic `TIME` followed by writes legal; `replicate_commands` covers 3.2-4.x.)
 *
 * KEYS[1]  the bucket hash: tokens (fractional), ts (ms, Redis clock), cap (capacity last used)
 * ARGV     capacity, refillPerMinute, cost (validated by the caller)
 * returns  { allowed (0|1), remaining, retryAfterMs, resetMs }
 *
 * The hash expires a second after the bucket would be full again (capped at a week for absurdly
 * slow refills), so idle keys vanish: a missing hash and a full bucket are the same thing.
 */
export const TOKEN_BUCKET_SCRIPT = `
if redis.replicate_commands then redis.replicate_commands() end

local capacity = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local eps = 1e-9

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000

local s = redis.call('HMGET', KEYS[1], 'tokens', 'ts', 'cap')
local tokens = tonumber(s[1])
local ts = tonumber(s[2])
local cap = tonumber(s[3])
if tokens == nil or ts == nil or cap == nil then
  tokens = capacity
else
  if capacity > cap then tokens = tokens + (capacity - cap) end
  local elapsed = now - ts
  if elapsed < 0 then elapsed = 0 end
  tokens = tokens + (elapsed * rate) / 60000
  if tokens >= capacity - eps then tokens = capacity end
end

local allowed = 0
if tokens + eps >= cost then
  allowed = 1
  tokens = tokens - cost
  if tokens < 0 then tokens = 0 end
end

local function ms_for(missing)
  if missing <= eps then return 0 end
  local ms = math.ceil((missing * 60000) / rate - 1e-6)
  if ms < 1 then ms = 1 end
  return ms
end

local reset_ms = ms_for(capacity - tokens)
local ttl = reset_ms + 1000
if ttl > 604800000 then ttl = 604800000 end

redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', tokens), 'ts', string.format('%.17g', now), 'cap', ARGV[1])
redis.call('PEXPIRE', KEYS[1], string.format('%d', ttl))
return { allowed, math.floor(tokens + eps), ms_for(cost - tokens), reset_ms }
`;

export const TOKEN_BUCKET_SHA1 = createHash('sha1').update(TOKEN_BUCKET_SCRIPT).digest('hex');
