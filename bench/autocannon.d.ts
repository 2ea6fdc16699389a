// The part of autocannon's API the HTTP benchmark uses (the package ships no types).
declare module 'autocannon' {
  export interface AutocannonRequest {
    method?: string;
    path?: string;
    headers?: Record<string, string>;
    body?: string;
    setupRequest?: (request: AutocannonRequest, context: Record<string, unknown>) => AutocannonRequest;
    onResponse?: (status: number, body: string, context: Record<string, unknown>) => void;
  }
  export interface AutocannonOptions {
    url: string;
    connections?: number;
    duration?: number;
    amount?: number;
    pipelining?: number;
    headers?: Record<string, string>;
    method?: string;
    body?: string;
    requests?: AutocannonRequest[];
    initialContext?: Record<string, unknown>;
    /** Called once for each connection's client, before its first request. */
    setupClient?: (client: AutocannonClient) => void;
  }
  /** One connection of a run. */
  export interface AutocannonClient {
    /** The requests this connection sends, in a loop, from now on. */
    setRequests(requests: AutocannonRequest[]): void;
  }
  export interface Histogram {
    average: number;
    p50: number;
    p99: number;
    mean: number;
  }
  export interface AutocannonResult {
    requests: Histogram & { total: number };
    latency: Histogram;
    non2xx: number;
    errors: number;
    timeouts: number;
    duration: number;
    '2xx': number;
    /** Responses by status code. */
    statusCodeStats?: Record<string, { count: number }>;
  }
  function autocannon(options: AutocannonOptions): Promise<AutocannonResult>;
  export default autocannon;
}
