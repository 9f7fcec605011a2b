// `event-assembler/testing`: rigs for users' own tests.
export {};
