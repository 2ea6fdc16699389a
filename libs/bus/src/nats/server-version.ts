/** Is the nats-server version (`2.9.10`, `v2.10.0-beta.1`) at least `major.minor.patch`? Unknown counts as old. */
export function versionAtLeast(version: string | undefined, major: number, minor: number, patch = 0): boolean {
  const match = /^v?(\d+)\.(\d+)\.(\d+)/.exec(version ?? '');
  if (!match) return false;
  const have = [Number(match[1]), Number(match[2]), Number(match[3])];
  const want = [major, minor, patch];
  for (let i = 0; i < 3; i++) {
    if (have[i]! !== want[i]!) return have[i]! > want[i]!;
  }
  return true;
}

/** `filter_subjects` (several filters on one consumer) arrived in nats-server 2.10. */
export function supportsMultipleFilters(version: string | undefined): boolean {
  return versionAtLeast(version, 2, 10, 0);
}

/**
 * Before nats-server 2.10.15 (nats-server#5338), a redelivery offered to a pull request whose
 * client had gone away was not counted properly: the next consumer saw `deliveryCount` 1 again.
 */
export function miscountsRedeliveryToStalePull(version: string | undefined): boolean {
  return !versionAtLeast(version, 2, 10, 15);
}
