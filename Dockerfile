# One image for every intake process; the service's command picks the role
# (npm run gateway | worker | migrate | dashboard), exactly as on a laptop.
FROM node:20-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production
COPY package.json package-lock.json prisma.config.ts ./
COPY scripts ./scripts
COPY prisma ./prisma
RUN npm ci --omit=dev --no-audit --no-fund
COPY bin ./bin
COPY cli ./cli
COPY common ./common
COPY gateway ./gateway
COPY workers ./workers
USER node
EXPOSE 3000
CMD ["npm", "run", "gateway"]
