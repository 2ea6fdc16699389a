export {
  createUsageMeter,
  quotaExceeded,
  type ConsumeRequest,
  type MeterDecision,
  type UsageCounter,
  type UsageMeter,
} from './usage-meter.js';
export {
  meteredUsageProvider,
  registerUsageProvider,
  usageAuthorizer,
  USAGE_REQUIREMENT,
  UsageService,
  type UsageLine,
  type UsageProvider,
  type UsageServiceHost,
} from './usage-service.js';
export { createLeasedMeter, type LeasedMeter, type LeasedMeterOptions } from './leased-meter.js';
