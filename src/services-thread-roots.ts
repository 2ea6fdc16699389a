/** The service modules an all-in-one process runs in its services thread (the rest of each thread's modules follow from their dependencies). */
export const SERVICES_THREAD_ROOTS = ['issues', 'agents-claims', 'imports-exports', 'audit'] as const;
