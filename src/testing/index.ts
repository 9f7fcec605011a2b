// `event-assembler/testing`: rigs for users' own tests.
export {
  startEmbeddedPostgres,
  createTestDatabase,
  type EmbeddedPostgres,
  type EmbeddedPostgresOptions,
  type PostgresServerInfo,
  type TestDatabase,
  type ConnectionOptions,
  type RoleOptions,
  type ParameterValue,
} from './postgres.js';
