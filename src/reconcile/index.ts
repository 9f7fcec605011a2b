export { defineReconciler, isReconciler, type AnyReconciler, type EntityState, type Reconciler, type ReconcilerDefinition, type ReconcileEvent } from './define-reconciler.js';
export { ReconcileError, type ReconcileErrorCode } from './errors.js';
export { reconcile, selectReconcilers } from './reconcile.js';
export { RECONCILE_MARKER_PREFIX } from './cut.js';
export type * from './types.js';
export { formatReconcileReport, formatReconcileProgress } from './format.js';
