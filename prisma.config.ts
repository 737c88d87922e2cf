import { defineConfig } from 'prisma/config';

// Used by the prisma CLI (generate; migrate deploy where the native engine can be fetched).
export default defineConfig({
  schema: 'prisma/schema.prisma',
  migrations: { path: 'prisma/migrations' },
  datasource: { url: process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/intake' },
});
