import type { Metadata } from '@grpc/grpc-js';
import type { TextMapGetter, TextMapSetter } from '@opentelemetry/api';

/** The tracer both ends of a call create their spans with. */
export const TRACER_NAME = 'planning-rpc';

/** Lets the OpenTelemetry propagator write W3C trace headers into gRPC metadata. */
export const metadataSetter: TextMapSetter<Metadata> = {
  set(metadata, key, value) {
    metadata.set(key, value);
  },
};

/** Lets the OpenTelemetry propagator read W3C trace headers from gRPC metadata. */
export const metadataGetter: TextMapGetter<Metadata> = {
  keys(metadata) {
    return Object.keys(metadata.getMap());
  },
  get(metadata, key) {
    const values = metadata.get(key).filter((v): v is string => typeof v === 'string');
    if (values.length === 0) return undefined;
    return values.length === 1 ? values[0] : values;
  },
};
